"""The project's external repositories, declared once for WORKSPACE and for MODULE.bazel.

WORKSPACE (Bazel 4.2.3, the path CI exercises) calls `executorch_trt_repositories()`;
MODULE.bazel (Bazel 7+) gets the same repositories through the module extension in
toolchains/extensions.bzl, which calls the same function.
"""

load("//toolchains:executorch_sdk.bzl", "executorch_sdk")
load("//toolchains:python_env.bzl", "pip_venv", "python_env")
load("//toolchains:python_headers.bzl", "python_headers")
load("//toolchains:system_library.bzl", "system_library")
load("//toolchains:tensorrt.bzl", "tensorrt_config")

# Debian packages ./bazelw installs: (repository, Debian package, path, name it is mounted as,
# library files from /usr/lib/<multiarch>/).
_SYSTEM_LIBRARIES = [
    ("googletest", "googletest", "/usr/src/googletest", None, []),
    ("nlohmann_json", "nlohmann-json3-dev", "/usr/include/nlohmann", "nlohmann", []),
    ("flatbuffers", "libflatbuffers-dev", "/usr/include/flatbuffers", "flatbuffers", []),
    ("flatc", "flatbuffers-compiler", "/usr/bin/flatc", "flatc", []),
    ("pybind11", "pybind11-dev", "/usr/include/pybind11", "pybind11", []),
    ("abseil", "libabsl-dev", "/usr/include/absl", "absl", []),
    ("libb2", "libb2-dev", "/usr/include/blake2.h", "blake2.h", ["libb2.a"]),
]

def executorch_trt_repositories():
    """Declares the pinned Python environment, the ExecuTorch C++ SDK from the pinned wheel,
    TensorRT + CUDA detection and the Debian-package libraries."""
    pip_venv(
        name = "pip_venv",
        lock = "//:requirements_lock.txt",
        requirements = "//:requirements.txt",
    )
    python_env(
        name = "python_env",
        freeze = "@pip_venv//:freeze.txt",
    )
    python_headers(
        name = "python_headers",
        freeze = "@pip_venv//:freeze.txt",
    )
    executorch_sdk(
        name = "executorch_sdk",
        lock = "//:requirements_lock.txt",
        requirements = "//:requirements.txt",
    )
    tensorrt_config(name = "tensorrt_config")
    for name, package, path, mount_as, libraries in _SYSTEM_LIBRARIES:
        kwargs = {"mount_as": mount_as} if mount_as else {}
        system_library(
            name = name,
            build_file = "//third_party:%s.BUILD" % name,
            debian_package = package,
            libraries = libraries,
            path = path,
            **kwargs
        )
