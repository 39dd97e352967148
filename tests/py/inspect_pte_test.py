"""tools/inspect_pte.py (`./bazelw run //tools:inspect_pte -- model.pte [--json]`), run through
its main() on a real exported program: the table, --json, paths relative to
BUILD_WORKING_DIRECTORY, and exit 2 with a message naming the file or flag for bad input."""

import contextlib
import io
import json
import os

import torch
from absl.testing import absltest

import decoder_models as dm
import executorch_trt
from tools import inspect_pte


def _run(argv, cwd=None):
    """(exit status, stdout, stderr) of inspect_pte.main(argv); `cwd` plays
    BUILD_WORKING_DIRECTORY."""
    out, err = io.StringIO(), io.StringIO()
    saved = os.environ.pop("BUILD_WORKING_DIRECTORY", None)
    if cwd is not None:
        os.environ["BUILD_WORKING_DIRECTORY"] = cwd
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = inspect_pte.main(argv)
            except SystemExit as exc:  # argparse usage errors
                status = exc.code
    finally:
        os.environ.pop("BUILD_WORKING_DIRECTORY", None)
        if saved is not None:
            os.environ["BUILD_WORKING_DIRECTORY"] = saved
    return status, out.getvalue(), err.getvalue()


class InspectPteTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = absltest.get_default_test_tmpdir()
        with torch.no_grad():
            program = executorch_trt.export(
                dm.export_reordered_kv(), kv_cache="copy_back", emit_mutable_buffer_names=True
            ).buffer
        cls.path = os.path.join(cls.tmp, "copy_back.pte")
        with open(cls.path, "wb") as f:
            f.write(program)
        cls.truncated = os.path.join(cls.tmp, "truncated.pte")
        with open(cls.truncated, "wb") as f:
            f.write(program[: len(program) // 2])

    def test_table(self):
        status, out, err = _run([self.path])
        self.assertEqual(status, 0, err)
        self.assertIn("method forward", out)
        self.assertIn("delegate calls: TensorRTBackend x1", out)
        # Which engine runs the delegate, from the first line on.
        self.assertTrue(
            out.splitlines()[0].endswith(
                "; engine portable (nested ExecuTorch program with XNNPACK, on the CPU))"
            ),
            out,
        )
        self.assertIn(
            "  engines: portable x1 (nested ExecuTorch program with XNNPACK, on the CPU)", out
        )
        self.assertRegex(out, r"k_cache\s+float32\s+\[1, 6, 4\]\s+96\s+written_back\s+96")
        self.assertIn("state bytes copied per call: 96", out)

    def test_json(self):
        status, out, err = _run([self.path, "--json"])
        self.assertEqual(status, 0, err)
        data = json.loads(out)
        self.assertEqual(data["format"], "executorch_trt.inspect/1")
        self.assertEqual(data["summary"]["state_bytes_copied_per_call"], {"forward": 96})
        self.assertEqual(data["methods"][0]["state"][0]["name"], "k_cache")
        self.assertEqual(data["methods"][0]["engines"], {"portable": 1})
        self.assertEqual(data["methods"][0]["delegates"][0]["device"], "CPU")
        self.assertEqual(data["summary"]["engines"], {"portable": 1})
        self.assertIn("engine portable", data["summary"]["engine_summary"])

    def test_relative_path_resolves_from_the_bazel_working_directory(self):
        status, out, err = _run(["copy_back.pte"], cwd=self.tmp)
        self.assertEqual(status, 0, err)
        self.assertIn(f"executorch_trt.inspect: {self.path} ", out)

    def test_missing_file(self):
        status, out, err = _run(["no_such.pte"], cwd=self.tmp)
        self.assertEqual(status, 2)
        self.assertEqual(out, "")
        self.assertIn(
            f"{os.path.join(self.tmp, 'no_such.pte')}: no such file; pass the path of a .pte file",
            err,
        )
        self.assertNotIn("Traceback", err)

    def test_truncated_file(self):
        status, _, err = _run([self.truncated])
        self.assertEqual(status, 2)
        self.assertIn(f"{self.truncated}: truncated", err)
        self.assertIn("export the file again", err)
        self.assertNotIn("Traceback", err)

    def test_directory_and_not_a_program(self):
        status, _, err = _run([self.tmp])
        self.assertEqual(status, 2)
        self.assertIn(f"{self.tmp}: is a directory", err)
        text = os.path.join(self.tmp, "notes.txt")
        with open(text, "w") as f:
            f.write("not a program\n")
        status, _, err = _run([text])
        self.assertEqual(status, 2)
        self.assertIn(f"{text}: not an ExecuTorch program", err)

    def test_unknown_flag(self):
        status, out, err = _run([self.path, "--tabel"])
        self.assertEqual(status, 2)
        self.assertIn("unrecognized arguments: --tabel", err)
        self.assertIn("--help", err)
        self.assertEqual(out, "")

    def test_no_program_given(self):
        status, _, err = _run([])
        self.assertEqual(status, 2)
        self.assertIn("required: PROGRAM.pte", err)


if __name__ == "__main__":
    absltest.main()
