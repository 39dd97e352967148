"""Detects TensorRT and CUDA on the host; generates @tensorrt_config.

`@tensorrt_config//:tensorrt` is a cc_library over TensorRT and the CUDA runtime, defining
EXECUTORCH_TRT_HAS_TENSORRT, when NvInfer.h, cuda_runtime_api.h and their libraries are all
found, and an empty cc_library otherwise (the first line of the generated BUILD file says which
and what is missing). The `tensorrt` engine is compiled only with the define; elsewhere the
portable engine runs everything. Search roots: $TENSORRT_ROOT, $CUDA_HOME, /usr/local/cuda, /usr
(Debian/Ubuntu multiarch layouts).
"""

def _find(rctx, roots, rel_paths):
    for root in roots:
        for rel in rel_paths:
            p = rctx.path(root + "/" + rel)
            if p.exists:
                return root, rel
    return None, None

def _tensorrt_config_impl(rctx):
    env = rctx.os.environ
    trt_roots = [r for r in [env.get("TENSORRT_ROOT"), "/usr/local/TensorRT", "/usr"] if r]
    cuda_roots = [r for r in [env.get("CUDA_HOME"), "/usr/local/cuda", "/usr"] if r]
    trt_root, trt_hdr = _find(rctx, trt_roots, ["include/NvInfer.h", "include/x86_64-linux-gnu/NvInfer.h"])
    cuda_root, cuda_hdr = _find(rctx, cuda_roots, ["include/cuda_runtime_api.h", "targets/x86_64-linux/include/cuda_runtime_api.h"])
    trt_lib_root, trt_lib = _find(rctx, trt_roots, ["lib/libnvinfer.so", "lib64/libnvinfer.so", "lib/x86_64-linux-gnu/libnvinfer.so"])
    cuda_lib_root, cuda_lib = _find(rctx, cuda_roots, ["lib64/libcudart.so", "lib/x86_64-linux-gnu/libcudart.so", "targets/x86_64-linux/lib/libcudart.so"])
    has = trt_hdr != None and cuda_hdr != None and trt_lib != None and cuda_lib != None
    reason = "found" if has else "not found: " + ", ".join([
        what
        for what, found in [("NvInfer.h", trt_hdr), ("cuda_runtime_api.h", cuda_hdr), ("libnvinfer.so", trt_lib), ("libcudart.so", cuda_lib)]
        if found == None
    ])
    if has:
        rctx.symlink(trt_root + "/" + trt_hdr.rsplit("/", 1)[0], "trt_include")
        rctx.symlink(cuda_root + "/" + cuda_hdr.rsplit("/", 1)[0], "cuda_include")
        rctx.symlink(trt_lib_root + "/" + trt_lib, "libnvinfer.so")
        rctx.symlink(cuda_lib_root + "/" + cuda_lib, "libcudart.so")
        body = """
cc_library(
    name = "tensorrt",
    hdrs = glob(["trt_include/Nv*.h", "cuda_include/**/*.h"]),
    includes = ["trt_include", "cuda_include"],
    srcs = ["libnvinfer.so", "libcudart.so"],
    defines = ["EXECUTORCH_TRT_HAS_TENSORRT"],
)
"""
    else:
        body = """
cc_library(name = "tensorrt")
"""
    rctx.file("BUILD.bazel", "# TensorRT + CUDA: " + reason + "\n" + 'load("@rules_cc//cc:defs.bzl", "cc_library")\npackage(default_visibility = ["//visibility:public"])\n' + body)

tensorrt_config = repository_rule(
    implementation = _tensorrt_config_impl,
    environ = ["TENSORRT_ROOT", "CUDA_HOME"],
    local = True,
    doc = "Detects TensorRT + CUDA; see the module docstring.",
)
