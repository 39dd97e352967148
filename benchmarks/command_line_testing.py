"""How the benchmark tests drive a benchmark's `main`: a quick run's exit code, output and
JSON result, and bad command lines, each of which must exit 2 naming the flag at fault."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import unittest
from collections.abc import Callable, Iterable

Main = Callable[[list[str]], int]


def quick_run(
    test_class: type[unittest.TestCase], main: Main, json_name: str, *flags: str
) -> tuple[str, int, str, dict]:
    """Runs `main(["--quick", "--out", OUT, *flags])`, OUT a new directory under $TEST_TMPDIR
    removed after `test_class`'s tests (call from its setUpClass), with its stdout captured
    (and printed again, for the test's log). Returns OUT, the exit code, that stdout and the
    JSON result it wrote to OUT/`json_name` (OSError if it wrote none)."""
    out_dir = test_class.enterClassContext(
        tempfile.TemporaryDirectory(
            prefix="quick_run_", dir=os.environ.get("TEST_TMPDIR"), ignore_cleanup_errors=True
        )
    )
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exit_code = main(["--quick", "--out", out_dir, *flags])
    print(stdout.getvalue())
    with open(os.path.join(out_dir, json_name)) as f:
        return out_dir, exit_code, stdout.getvalue(), json.load(f)


def assert_each_exits_2(
    test: unittest.TestCase, main: Main, cases: Iterable[tuple[list[str], str]]
) -> None:
    """For each `(argv, flag)` of `cases`: `main(argv)` raises SystemExit with code 2 and its
    stderr contains `flag` (failures name the argv)."""
    for argv, flag in cases:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), test.assertRaises(SystemExit) as cm:
            main(argv)
        test.assertEqual(cm.exception.code, 2, argv)
        test.assertIn(flag, stderr.getvalue(), argv)
