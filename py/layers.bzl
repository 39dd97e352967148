"""One layer of the executorch_trt package as a py_library."""

load("@rules_python//python:defs.bzl", "py_library")

def executorch_trt_layer(name, deps = [], data = [], package = False):
    """Declares `:name`: the package's `executorch_trt/<name>/` folder (`package = True`) or
    its module `executorch_trt/<name>.py`, depending only on `deps` (lower layers)."""
    py_library(
        name = name,
        srcs = native.glob(["executorch_trt/{}/**/*.py".format(name)]) if package else ["executorch_trt/{}.py".format(name)],
        data = data,
        imports = ["."],
        deps = deps,
    )
