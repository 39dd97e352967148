"""The ExecuTorch C++ SDK (headers + shared libraries) from the pinned ExecuTorch wheel.

The wheel is fetched with pip from the package index (pip's own cache makes re-fetches
cheap), checked against EXECUTORCH_VERSION and EXECUTORCH_WHEEL_SHA256 in pins.bzl, and its
`executorch/include` and `executorch/lib/*.so` are exposed as cc_library targets, and its
`executorch/schema/*.fbs` (the .pte format) as `:program_schema` for flatc. Independent
of the Python environment: C++-only builds never create the venv.
"""

load(":pin_checks.bzl", "PIN_FILE_ATTRS", "fail_on_executorch_drift")
load(":pins.bzl", "EXECUTORCH_VERSION", "EXECUTORCH_WHEEL_SHA256", "EXECUTORCH_WHEEL_TAG", "PYTHON_INTERPRETER")

def _executorch_sdk_impl(rctx):
    fail_on_executorch_drift(rctx, rctx.attr.requirements, rctx.attr.lock)
    python = rctx.which(PYTHON_INTERPRETER) or rctx.which("python3")
    if python == None:
        fail("executorch_sdk: neither {} nor python3 is on PATH (needed to run pip download).".format(PYTHON_INTERPRETER))
    wheel = "executorch-{}-{}.whl".format(EXECUTORCH_VERSION, EXECUTORCH_WHEEL_TAG)
    rctx.report_progress("fetching the ExecuTorch {} wheel for its C++ SDK".format(EXECUTORCH_VERSION))
    result = rctx.execute([
        python,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux_2_28_x86_64",
        "--dest",
        "wheel",
        "executorch=={}".format(EXECUTORCH_VERSION),
    ], timeout = 900, quiet = True)
    if result.return_code != 0:
        fail("executorch_sdk: pip download executorch=={} failed:\n{}".format(EXECUTORCH_VERSION, result.stderr))
    result = rctx.execute([python, rctx.path(rctx.attr._unpack), "wheel/" + wheel, EXECUTORCH_VERSION, EXECUTORCH_WHEEL_SHA256, "."], quiet = True)
    if result.return_code != 0:
        fail("executorch_sdk: {}".format(result.stderr))
    rctx.delete("wheel")
    rctx.symlink(rctx.attr._build, "BUILD.bazel")

executorch_sdk = repository_rule(
    implementation = _executorch_sdk_impl,
    attrs = dict(PIN_FILE_ATTRS, **{
        "_unpack": attr.label(default = "//toolchains:unpack_executorch_sdk.py", allow_single_file = True),
        "_build": attr.label(default = "//third_party:executorch_sdk.BUILD", allow_single_file = True),
    }),
    doc = "cc_library targets over the pinned ExecuTorch wheel's C++ SDK.",
)
