"""normalize_pep440 for Bazel 4.2.3, which has no `lambda` (upstream's PEP 440 normalizer is
built on lambdas): accepts only a version that is already normalized, N(.N)*, and returns it."""

def normalize_pep440(version):
    """Returns `version` when it is a normalized PEP 440 release (digits and dots), else fails.

    Args:
      version: the version string.
    """
    parts = version.split(".")
    for part in parts:
        if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
            fail("py_wheel version {!r}: the offline rules_python stand-in takes only a normalized release version such as 1.2.3".format(version))
    return version
