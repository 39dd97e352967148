"""fuzz_target: a libFuzzer target with its `bazel run` entry point and its smoke test.

Under --config=fuzz (.bazelrc: clang 19, --define=fuzzing_engine=libfuzzer) the target links
libFuzzer (-fsanitize=fuzzer) and the smoke test fuzzes `smoke_runs` inputs from a fixed seed.
In every other build (gcc, including --config=asan) it links tests/fuzz/replay_main.cpp instead, and the
smoke test runs every seed and regression input once: the corpora are regression tests in
`bazel test //...` without clang.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary")

def fuzz_target(name, srcs, deps = [], seeds = [], dictionary = None, max_len = None, smoke_runs = 100000):
    """Declares `name` (bazel run), `name`_bin (the binary) and `name`_smoke (a test).

    Args:
      name: the fuzzer; `./bazelw run //tests/fuzz:<name> -- <libFuzzer flags>`.
      srcs: the sources defining LLVMFuzzerTestOneInput (and optionally LLVMFuzzerInitialize).
      deps: the libraries under test.
      seeds: labels of seed files or filegroups (copied into the working corpus).
      dictionary: a libFuzzer dictionary file (-dict=), or None.
      max_len: libFuzzer's -max_len (longest input it generates; longer seeds are truncated),
        or None for the longest seed.
      smoke_runs: inputs the smoke test runs under --config=fuzz, from a fixed seed (-seed=1),
        so a CI run is reproducible (about 10-20 s on CI's 2 cores; capped at 60 s).
    """
    binary = name + "_bin"
    cc_binary(
        name = binary,
        testonly = True,
        srcs = srcs,
        deps = deps + select({
            "//tests/fuzz:libfuzzer": [],
            "//conditions:default": ["//tests/fuzz:replay_main"],
        }),
        linkopts = select({
            "//tests/fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    data = [":" + binary] + seeds + ([dictionary] if dictionary else [])
    args = [name, "$(rootpath :%s)" % binary] + ["$(rootpaths %s)" % s for s in seeds] + ["--"]
    if dictionary:
        args.append("-dict=$(rootpath %s)" % dictionary)
    if max_len:
        args.append("-max_len=%d" % max_len)
    native.sh_binary(
        name = name,
        testonly = True,
        srcs = ["//tests/fuzz:run_fuzzer.sh"],
        data = data,
        args = args,
    )
    native.sh_test(
        name = name + "_smoke",
        size = "medium",
        srcs = ["//tests/fuzz:run_fuzzer.sh"],
        data = data,
        args = args + [
            "-seed=1",
            "-runs=%d" % smoke_runs,
            "-max_total_time=60",
            "-timeout=10",
            "-print_final_stats=1",
        ],
    )
