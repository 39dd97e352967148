"""Fail-closed checks that every file pinning ExecuTorch agrees with toolchains/pins.bzl."""

load(":pins.bzl", "EXECUTORCH_VERSION")

def _check_text(label, text):
    for line in text.splitlines():
        line = line.split("#")[0].strip().lower().replace("_", "-")
        if line.startswith("executorch=="):
            found = line[len("executorch=="):].strip()
            if found != EXECUTORCH_VERSION:
                fail(("ExecuTorch version mismatch: {} pins executorch=={} but " +
                      "toolchains/pins.bzl pins EXECUTORCH_VERSION = \"{}\". Change both " +
                      "(and regenerate the lock with tools/update_lock.sh).").format(
                    label,
                    found,
                    EXECUTORCH_VERSION,
                ))
            return
    fail("{} does not pin executorch=={} (toolchains/pins.bzl); add the line.".format(
        label,
        EXECUTORCH_VERSION,
    ))

# The attributes of a repository rule that reads the pins: the two requirements files
# fail_on_executorch_drift checks (pip_venv and executorch_sdk both take them).
PIN_FILE_ATTRS = {
    "requirements": attr.label(mandatory = True, allow_single_file = True),
    "lock": attr.label(mandatory = True, allow_single_file = True),
}

def fail_on_executorch_drift(rctx, requirements, lock):
    """Fails the repository rule, naming both versions, when `requirements` or `lock` (labels
    of requirements.txt / requirements_lock.txt) pin executorch to anything but
    EXECUTORCH_VERSION, or do not pin it at all. Reading them makes the rule re-run when
    either file changes."""
    _check_text("requirements.txt", rctx.read(requirements))
    _check_text("requirements_lock.txt", rctx.read(lock))
