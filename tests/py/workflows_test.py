"""GitHub workflow files validate against GitHub's workflow schema, offline.

Uses check-jsonschema's vendored `vendor.github-workflows` schema (no network).
"""

import subprocess
import sys

from absl.testing import absltest
from runfiles import Runfiles


def workflow_files() -> list[str]:
    r = Runfiles.Create()
    manifest = r.Rlocation("executorch_trt/tests/py/workflows.txt")
    with open(manifest, encoding="utf-8") as f:
        return [r.Rlocation("executorch_trt/" + line.strip()) for line in f if line.strip()]


def check(paths: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            *paths,
        ],
        capture_output=True,
        text=True,
    )


class WorkflowsTest(absltest.TestCase):
    def test_workflows_are_valid(self):
        files = workflow_files()
        self.assertNotEmpty(files, "no .github/workflows/*.yml found")
        result = check(files)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_invalid_workflow_is_rejected(self):
        bad = self.create_tempfile("bad.yml", "on: push\njobs:\n  build:\n    steps: 3\n")
        result = check([bad.full_path])
        self.assertNotEqual(result.returncode, 0, result.stdout)


if __name__ == "__main__":
    absltest.main()
