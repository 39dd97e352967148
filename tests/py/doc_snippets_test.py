"""Every example script in the README and the user guide runs as written: each fenced
``python`` block whose first line is ``# <name>.py`` is run in a fresh process in an empty
directory (the pinned environment, the delegate library found as a user's script finds it) and
must exit 0. A snippet that drifts from the API fails here."""

import glob
import os
import re
import tempfile

from absl.testing import absltest
from runfiles import Runfiles

import delegate_library

_BLOCK = re.compile(r"```python\n(# ([\w.]+\.py)[^\n]*\n.*?)```", re.S)


def _snippets():
    r = Runfiles.Create()
    readme = r.Rlocation("executorch_trt/README.md")
    docs = os.path.dirname(r.Rlocation("executorch_trt/docs/README.md"))
    found = {}
    for path in [readme, *sorted(glob.glob(os.path.join(docs, "guide", "*.md")))]:
        with open(path) as f:
            text = f.read()
        for code, name in _BLOCK.findall(text):
            where = f"{os.path.relpath(path, os.path.dirname(readme))}: {name}"
            if code not in found.values():
                found[where] = code
    return found


@delegate_library.needs_library
class DocSnippetsTest(absltest.TestCase):
    def test_the_docs_have_scripts(self):
        names = [where.split(": ")[1] for where in _snippets()]
        for expected in ("my_export.py", "conversation.py", "sessions.py"):
            self.assertIn(expected, names)

    def test_every_script_runs(self):
        for where, code in _snippets().items():
            with self.subTest(where):
                done = delegate_library.run_script(
                    code,
                    tempfile.mkdtemp(),
                    where.split(": ")[1],
                    dict(delegate_library.subprocess_env(), HF_HUB_OFFLINE="1"),
                )
                self.assertEqual(done.returncode, 0, f"{where}:\n{done.stderr[-3000:]}")


if __name__ == "__main__":
    absltest.main()
