"""Build-time export of ExecuTorch programs with executorch_trt.

`executorch_program` runs a Python export script under the pinned environment as a build
action and declares its outputs, so a `.pte` (and anything written beside it, such as an
eager reference) is an ordinary, cacheable Bazel output. The script must write each output
to the path given after its flag and be deterministic (seed everything): the same inputs
give the same bytes, so rebuilds are served from cache.
"""

load("@rules_python//python:defs.bzl", "py_binary")

def executorch_program(name, script, outs, args = [], deps = [], **kwargs):
    """Declares a genrule `name` that runs `script` to produce `outs`.

    Args:
      name: the target; its outputs are the values of `outs`.
      script: the export script (a .py file in this package), run as `__main__`.
      outs: dict of flag -> output file name, e.g. {"--pte": "m.pte", "--reference": "m.json"};
        the script is called with `FLAG PATH` for each entry.
      args: extra command-line arguments for the script.
      deps: extra py_library deps (executorch_trt is always available).
      **kwargs: passed to the genrule (tags, visibility, ...).
    """
    tool = name + "_exporter"
    py_binary(
        name = tool,
        srcs = [script],
        main = script,
        deps = ["//py:executorch_trt"] + deps,
        testonly = kwargs.get("testonly", False),
        visibility = ["//visibility:private"],
    )
    flags = " ".join(["{} $(location {})".format(flag, out) for flag, out in outs.items()])
    native.genrule(
        name = name,
        outs = outs.values(),
        tools = [":" + tool],
        # HOME is unset under --incompatible_strict_action_env; torch and transformers want one.
        cmd = "HOME=$$(mktemp -d) $(location :{}) {} {}".format(tool, flags, " ".join(args)),
        message = "Exporting {} with executorch_trt".format(name),
        **kwargs
    )
