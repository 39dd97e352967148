"""``delegate_library``: a missing delegate library fails under Bazel and skips outside it."""

import os
import unittest
from unittest import mock

from absl.testing import absltest

import delegate_library
from executorch_trt import runtime

_MISSING = {runtime.LIBRARY_ENV: "/nonexistent/libexecutorch_trt.so"}
_OUTSIDE = ("TEST_SRCDIR", "RUNFILES_DIR")


def _outside_bazel():
    env = {k: v for k, v in os.environ.items() if k not in _OUTSIDE}
    env.update(_MISSING)
    return mock.patch.dict(os.environ, env, clear=True)


class DelegateLibraryTest(absltest.TestCase):
    def test_missing_library_fails_under_bazel(self):
        with mock.patch.dict(os.environ, dict(_MISSING, TEST_SRCDIR="/srcdir")):
            self.assertTrue(delegate_library.under_bazel())
            self.assertFalse(delegate_library.available())
            with self.assertRaisesRegex(
                AssertionError, "not found under Bazel.*does not name a file"
            ):
                delegate_library.require()

    def test_missing_library_skips_outside_bazel(self):
        with _outside_bazel():
            self.assertFalse(delegate_library.under_bazel())
            with self.assertRaisesRegex(unittest.SkipTest, "unavailable.*does not name a file"):
                delegate_library.require()

    def test_class_decorator_runs_require_before_setup(self):
        calls = []

        @delegate_library.needs_library
        class Needs(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                calls.append(cls.__name__)

            def test_nothing(self):
                pass

        with _outside_bazel():
            result = unittest.TestResult()
            unittest.defaultTestLoader.loadTestsFromTestCase(Needs).run(result)
        self.assertEqual((len(result.skipped), calls), (1, []))
        with mock.patch.dict(os.environ, dict(_MISSING, TEST_SRCDIR="/srcdir")):
            result = unittest.TestResult()
            unittest.defaultTestLoader.loadTestsFromTestCase(Needs).run(result)
        self.assertEqual((len(result.errors), calls), (1, []))


if __name__ == "__main__":
    absltest.main()
