"""`//benchmarks:export_time` on the tiny model: the structure of its output (every phase of
the export is there, nested where it runs, with its calls; the totals; the .pte's size and
digest), never timings."""

import contextlib
import io
import json
import os
import tempfile
import unittest.mock

from absl.testing import absltest

from benchmarks import export_time


class ExportTimeQuickTest(absltest.TestCase):
    def test_tiny_export(self):
        with tempfile.TemporaryDirectory() as directory:
            out = os.path.join(directory, "tiny.pte")
            result_path = os.path.join(directory, "result.json")
            printed = io.StringIO()
            # Partitions built in this process, so that the phases inside the builds are timed.
            with (
                contextlib.redirect_stdout(printed),
                unittest.mock.patch.dict(os.environ, {"EXECUTORCH_TRT_BUILD_WORKERS": "1"}),
            ):
                code = export_time.main(["--model", "tiny", "--out", out, "--json", result_path])
            self.assertEqual(code, 0)
            with open(result_path) as f:
                result = json.load(f)
            self.assertEqual(os.path.getsize(out), result["pte_bytes"])
        self.assertEqual((result["model"], result["path"]), ("tiny", "export"))
        self.assertGreater(result["export_seconds"], 0)
        self.assertGreater(result["peak_rss_mib"], 0)
        self.assertGreater(result["peak_tree_pss_mib"], 0)
        self.assertLen(result["pte_sha256"], 64)
        calls = {tuple(r["path"]): r["calls"] for r in result["phases"]}
        export = ("executorch_trt.export", "to_edge_transform_and_lower")
        preprocess = (*export, "to_backend", "preprocess")
        nested = (*preprocess, "engine builds", "nested lowering")
        # One method each: prefill and decode, one delegate each, preprocessed together.
        self.assertEqual(calls[("torch.export",)], 1)
        self.assertEqual(calls[preprocess], 1)
        self.assertEqual(calls[(*preprocess, "analysis")], 2)
        self.assertEqual(calls[nested], 2)
        self.assertEqual(calls[(*nested, "nested serialization")], 2)
        self.assertGreaterEqual(calls[(*nested, "to_backend", "xnnpack preprocess")], 2)
        self.assertEqual(calls[("executorch_trt.export", "to_executorch")], 1)
        for row in result["phases"]:
            self.assertGreaterEqual(row["self_seconds"], -1e-6, row["path"])
            self.assertLessEqual(row["self_seconds"], row["seconds"] + 1e-6, row["path"])
        text = printed.getvalue()
        self.assertIn("nested lowering", text)
        self.assertIn("export total", text)
        self.assertIn(result["pte_sha256"], text)


if __name__ == "__main__":
    absltest.main()
