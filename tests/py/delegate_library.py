"""The delegate library in tests: a missing one skips outside Bazel and fails under Bazel.

Tests that load programs need ``libexecutorch_trt.so`` (``executorch_trt.runtime.library_path``:
``$EXECUTORCH_TRT_LIBRARY``, then Bazel runfiles). Under ``bazel test`` the library is a
declared data dependency of the test, so not finding it means a broken lookup or BUILD file:
the test *fails*, naming why, instead of turning into a green run of skipped tests. Outside
Bazel (a test file run directly with the venv python) the tests that need it skip with the
reason. Every test that needs the library goes through ``require`` (or ``needs_library``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from executorch_trt import runtime


def under_bazel() -> bool:
    """Whether this process runs under Bazel: ``bazel test`` sets ``TEST_SRCDIR``, ``bazel run``
    sets ``RUNFILES_DIR``."""
    return bool(os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR"))


def available() -> bool:
    """Whether ``runtime.library_path()`` finds the delegate library."""
    return runtime.library_unavailable_reason() is None


def require() -> None:
    """Returns when the library is found. Otherwise raises ``AssertionError`` (a failure) under
    Bazel and ``unittest.SkipTest`` outside it, with the reason either way. Call it from a test
    or from ``setUpClass`` (``needs_library``)."""
    reason = runtime.library_unavailable_reason()
    if reason is None:
        return
    if under_bazel():
        raise AssertionError(
            "delegate library not found under Bazel, where it is a declared data dependency of "
            f"this test (add //core:libexecutorch_trt.so to its data): {reason}"
        )
    raise unittest.SkipTest(f"delegate library unavailable: {reason}")


def needs_library(cls):
    """Class decorator: ``require()`` before the class's ``setUpClass`` (so a missing library
    skips or fails every test of the class, and the class's setup does not run)."""
    setup = cls.setUpClass.__func__

    def setUpClass(klass):  # unittest's name
        require()
        setup(klass)

    cls.setUpClass = classmethod(setUpClass)
    return cls


def subprocess_env() -> dict:
    """This process's environment for a child Python process that loads programs: its
    ``sys.path`` as ``PYTHONPATH`` and the delegate library and binding this process found
    (``runtime.LIBRARY_ENV``, ``runtime.BINDING_ENV``, absolute). Call after ``require()``:
    raises what ``runtime.library_path()`` raises when there is no library."""
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        **{
            runtime.LIBRARY_ENV: os.path.abspath(runtime.library_path()),
            runtime.BINDING_ENV: os.path.abspath(runtime.binding_path()),
        },
    )


def start_worker(script: str, *args: str) -> subprocess.Popen:
    """Starts ``python <script> args...`` (``script``: a file of tests/py/) with
    ``subprocess_env()``, its stdout and stderr piped as text (undecodable bytes replaced:
    ExecuTorch's log lines may quote them)."""
    return subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), script), *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )


def run_script(
    code: str, directory: str, name: str, env: dict, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """Writes ``code`` to ``directory/name`` and runs it with this interpreter in ``directory``
    (as a user runs a script), ``env`` its whole environment (e.g. ``subprocess_env()``, changed);
    its stdout and stderr captured as text (undecodable bytes replaced). Raises
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds (None: no limit)."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(code)
    return subprocess.run(
        [sys.executable, path],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
    )
