"""//examples/link_into_app: an ExecuTorch C++ app with the delegate linked in
(//core:executorch_trt_static) runs a product program with eager PyTorch's values at every
step (the mutable buffer persists across calls); the same app without the delegate fails to
load the method, naming TensorRTBackend, with exit 1.

usage: link_into_app_test.py APP APP_WITHOUT_DELEGATE MODEL.pte EXPECTED.txt
"""

from __future__ import annotations

import re
import subprocess
import sys
import unittest

TOLERANCE = 1e-5


def _steps(text: str) -> dict:
    """`step K: v0 v1 ...` lines -> {K: [floats]}."""
    return {
        int(m.group(1)): [float(v) for v in m.group(2).split()]
        for m in re.finditer(r"^step (\d+):((?: \S+)+)$", text, re.M)
    }


class LinkIntoAppTest(unittest.TestCase):
    app = without_delegate = model = expected = ""

    def _run(self, app: str) -> subprocess.CompletedProcess:
        return subprocess.run([app, self.model], capture_output=True, text=True, timeout=300)

    def test_linked_app_runs_a_product_program_as_eager(self):
        result = self._run(self.app)
        self.assertEqual(result.returncode, 0, f"{result.stdout}\n{result.stderr}")
        with open(self.expected) as f:
            want = _steps(f.read())
        got = _steps(result.stdout)
        self.assertEqual(sorted(want), [0, 1, 2, 3])
        self.assertEqual(sorted(got), sorted(want), result.stdout)
        for step, values in want.items():
            self.assertEqual(len(got[step]), len(values))
            diff = max(abs(a - b) for a, b in zip(got[step], values))
            self.assertLess(diff, TOLERANCE, f"step {step}: {got[step]} vs eager {values}")
        # Each step adds a row to the cache: the outputs differ only if the buffer persisted.
        self.assertGreater(max(abs(a - b) for a, b in zip(want[3], want[0])), 0.1)

    def test_app_without_the_delegate_names_the_backend(self):
        result = self._run(self.without_delegate)
        self.assertEqual(result.returncode, 1, f"{result.stdout}\n{result.stderr}")
        self.assertIn("Backend TensorRTBackend is not registered", result.stderr)
        self.assertIn("link_into_app: loading method 'forward'", result.stderr)
        self.assertNotIn("step 0:", result.stdout)


if __name__ == "__main__":
    (
        LinkIntoAppTest.app,
        LinkIntoAppTest.without_delegate,
        LinkIntoAppTest.model,
        LinkIntoAppTest.expected,
    ) = sys.argv[1:5]
    unittest.main(argv=sys.argv[:1])
