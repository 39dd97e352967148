"""The ExecuTorch pin is held in one place (toolchains/pins.bzl) and nothing contradicts it.

Scans every text file of the source tree for a mention of an ExecuTorch version
(`executorch==X`, `executorch-X-...whl`, `ExecuTorch X.Y.Z`, `EXECUTORCH_VERSION = "X"`) and
fails naming the file, the line and both versions when one differs from the pin. Also checks
that the installed executorch is the pinned one.
"""

import importlib.metadata
import os
import re
import subprocess

from absl.testing import absltest
from runfiles import Runfiles

_MENTION = re.compile(
    r"(?:executorch\s*==\s*|executorch-|ExecuTorch\s+v?|EXECUTORCH_VERSION\s*=\s*\")"
    r"(\d+\.\d+\.\d+[\w.]*)",
    re.IGNORECASE,
)
_SKIP_DIRS = {".git", "__pycache__"}
_TEXT_SUFFIXES = (
    ".py",
    ".bzl",
    ".txt",
    ".md",
    ".yml",
    ".yaml",
    ".cc",
    ".cpp",
    ".h",
    ".sh",
    ".bazel",
    ".tpl",
    ".BUILD",
    ".json",
    "BUILD",
    "WORKSPACE",
    "bazelw",
    "run",
)


def source_root() -> str:
    """The checkout the test was built from (runfiles symlink back into the source tree)."""
    workspace = Runfiles.Create().Rlocation("executorch_trt/WORKSPACE")
    return os.path.dirname(os.path.realpath(workspace))


def repo_files(root: str) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-co", "--exclude-standard"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return [os.path.join(root, p) for p in out.splitlines() if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in _SKIP_DIRS and not x.startswith("bazel-")]
            files += [os.path.join(d, n) for n in names]
        return files


def pinned_version(root: str) -> str:
    with open(os.path.join(root, "toolchains", "pins.bzl"), encoding="utf-8") as f:
        m = re.search(r'^EXECUTORCH_VERSION\s*=\s*"([^"]+)"', f.read(), re.M)
    assert m, "toolchains/pins.bzl has no EXECUTORCH_VERSION"
    return m.group(1)


def find_drift(root: str, pin: str) -> list[str]:
    """Lines in the tree that name an ExecuTorch version other than `pin`."""
    problems = []
    for path in repo_files(root):
        if not path.endswith(_TEXT_SUFFIXES) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                for m in _MENTION.finditer(line):
                    if m.group(1).rstrip(".") != pin:
                        rel = os.path.relpath(path, root)
                        problems.append(
                            f"{rel}:{lineno}: names ExecuTorch {m.group(1)}, "
                            f"toolchains/pins.bzl pins {pin}"
                        )
    return problems


class PinsTest(absltest.TestCase):
    def test_no_file_names_another_executorch_version(self):
        root = source_root()
        problems = find_drift(root, pinned_version(root))
        self.assertEmpty(problems, "\n".join(problems))

    def test_requirements_pin_the_same_version(self):
        root = source_root()
        pin = pinned_version(root)
        for name in ("requirements.txt", "requirements_lock.txt"):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                self.assertIn(
                    f"executorch=={pin}\n", f.read(), f"{name} must pin executorch=={pin}"
                )

    def test_installed_executorch_is_the_pin(self):
        self.assertEqual(importlib.metadata.version("executorch"), pinned_version(source_root()))

    def test_detector_catches_drift(self):
        # The check itself must be able to fail: a tree naming another version is reported.
        # (The other version is assembled at run time so this file itself names no other.)
        pin, other = "9.9.9", ".".join(["9", "8", "0"])
        tmp = self.create_tempdir()
        tmp.create_file("toolchains/pins.bzl", f'EXECUTORCH_VERSION = "{pin}"\n')
        tmp.create_file("requirements.txt", f"executorch=={other}\n")
        problems = find_drift(tmp.full_path, pin)
        self.assertLen(problems, 1)
        self.assertIn(f"requirements.txt:1: names ExecuTorch {other}", problems[0])


if __name__ == "__main__":
    absltest.main()
