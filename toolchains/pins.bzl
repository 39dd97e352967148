"""The project's pins. The ExecuTorch pin lives here and nowhere else.

`requirements.txt` and `requirements_lock.txt` must name the same ExecuTorch version: the
`pip_venv` and `executorch_sdk` repository rules fail closed on any mismatch, naming both
versions, and `//tests/py:pins_test` fails when any file in the repo names another one.
"""

# ExecuTorch release whose Python package and C++ SDK (headers + shared libraries shipped in
# its wheel) the delegate is built and tested against.
EXECUTORCH_VERSION = "1.5.1"

# sha256 of the manylinux x86_64 CPython 3.11 wheel of that release (the C++ SDK comes from it).
EXECUTORCH_WHEEL_SHA256 = "274c28c2fe2b76acb03f9fa381537425c40e0098dcf886baf6d97a1a55ffe300"

# The wheel's platform tags: the local CPU torch wheel and the ExecuTorch wheel are CPython 3.11.
PYTHON_VERSION = "3.11"
EXECUTORCH_WHEEL_TAG = "cp311-cp311-manylinux_2_28_x86_64"

# The Python interpreter the pinned environment is created from (found on PATH).
PYTHON_INTERPRETER = "python3.11"
