"""Runs the decode benchmark in quick mode (tiny model, 2 repeats) and checks the structure of
its output and the byte counts, never the timings:

* every row has the JSON fields, numbers where it ran, and every variant x capacity is there;
* delegate in-place copies 0 cache bytes per step;
* delegate copy_back copies exactly the cache (sum of KV cache nbytes) per step;
* the delegate's .pte holds the weights once, and with external weights the .ptd does;
* plain ExecuTorch's default configuration shows its write-back copy of the cache, and its
  reinplace configuration does not;
* every variant has one timed step per round (they are timed interleaved in one process);
* every row names what runs its decode step, read off its program (the delegate variants: the
  portable engine on the CPU; plain ExecuTorch: no delegate, or XnnpackBackend delegates), and
  so do the table, its header and decode_step_cpp's result;
* delegate in-place is timed in C++ too (decode_step_cpp): its row has the C++ fields, one
  sample per timed step, and the table their column; no other row has them;
* bad flags exit 2 naming the flag, in decode.py and in decode_step_cpp (which also exits 2,
  naming the file or the flag, on a missing or corrupt .pte, a cache name the program does not
  have and a capacity it was not exported with).
"""

import contextlib
import io
import json
import os
import re
import statistics
import subprocess

from absl.testing import absltest

from benchmarks import command_line_testing, cpp_timing, decode, report, workload
from benchmarks.bench_config import QUICK_DIMS, quick_config
from benchmarks.variants import VARIANTS, BuiltProgram

FIELDS = (
    "variant",
    "max_seq_len",
    "step_ms_median",
    "step_ms_p10",
    "step_ms_p90",
    "runtime_bytes_copied_per_step",
    "peak_rss_mb",
    "engine",
    "decode_delegates",
)
PORTABLE_WITH_XNNPACK = (
    "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program "
    "with XNNPACK, on the CPU)"
)


def _worker_argv(kind: str, programs: str) -> list[str]:
    """The arguments of a ``--worker`` invocation at capacity 32 with an empty config."""
    return ["--worker", kind, "--max-seq-len", "32", "--config-json", "{}", "--programs", programs]


class DecodeBenchQuickTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out, cls.exit_code, cls.stdout, cls.result = command_line_testing.quick_run(
            cls, decode.main, report.JSON_NAME, "--keep-programs"
        )
        cls.rows = {(r["variant"], r["max_seq_len"]): r for r in cls.result["rows"]}
        cls.capacities = tuple(cls.result["settings"]["max_seq_lens"])

    def row(self, variant, capacity):
        r = self.rows[(variant, capacity)]
        self.assertIsNone(r["error"], f"{variant}@{capacity} failed: {r['error']}")
        return r

    def test_every_row_ran_with_all_fields(self):
        self.assertEqual(set(self.rows), {(v, s) for v in VARIANTS for s in self.capacities})
        for (variant, capacity), r in self.rows.items():
            self.assertIsNone(r["error"], f"{variant}@{capacity} failed: {r['error']}")
            for field in FIELDS:
                self.assertIn(field, r)
                self.assertIsNotNone(r[field], f"{variant}@{capacity}: {field} is null")
            self.assertLessEqual(r["step_ms_p10"], r["step_ms_median"])
            self.assertLessEqual(r["step_ms_median"], r["step_ms_p90"])
            self.assertGreater(r["peak_rss_mb"], 0)
        self.assertEqual(self.exit_code, 0)

    def test_every_variant_timed_in_every_round(self):
        repeats = self.result["settings"]["repeats"]
        self.assertIn("one process", self.result["settings"]["timing"])
        for (variant, capacity), r in self.rows.items():
            samples = r["step_ms_samples"]
            self.assertLen(samples, repeats, f"{variant}@{capacity}")
            self.assertTrue(all(t > 0 for t in samples), f"{variant}@{capacity}: {samples}")
            after = r["step_ms_after_switch_samples"]
            self.assertLen(after, repeats, f"{variant}@{capacity}")
            self.assertTrue(all(t > 0 for t in after), f"{variant}@{capacity}: {after}")
            self.assertEqual(r["step_ms_after_switch_median"], statistics.median(after))
        self.assertEqual(self.result["settings"]["lead_in_ms"], 5.0)

    def test_every_variant_names_what_runs_it(self):
        for (variant, capacity), r in self.rows.items():
            where = f"{variant}@{capacity}"
            if variant.startswith("delegate_"):
                self.assertEqual(r["engine"], "portable, CPU", where)
                self.assertEqual(r["decode_delegates"], PORTABLE_WITH_XNNPACK, where)
            elif variant == "executorch_xnnpack":
                self.assertEqual(r["engine"], "XnnpackBackend", where)
                self.assertRegex(r["decode_delegates"], r"^\d+ XnnpackBackend delegates?$", where)
            elif variant.startswith("executorch_"):
                self.assertEqual(r["engine"], "no delegate", where)
                self.assertEqual(
                    r["decode_delegates"], "no delegate (ExecuTorch's CPU kernels)", where
                )
            else:
                self.assertEqual(r["engine"], "eager PyTorch", where)
            # decode_step_cpp reads the engine off the program too.
            expected = "portable, CPU" if variant in cpp_timing.CPP_VARIANTS else None
            self.assertEqual(r["cpp_engine"], expected, where)
        # The table's engine column and the header's line per variant.
        self.assertRegex(self.stdout, r"\nvariant +engine +max_seq_len ")
        self.assertRegex(self.stdout, r"\ndelegate_inplace +portable, CPU +\d+ ")
        self.assertIn("what runs each decode step (read from each variant's program):", self.stdout)
        self.assertIsNotNone(
            re.search(
                r"\n  delegate_inplace +" + re.escape(PORTABLE_WITH_XNNPACK) + "\n", self.stdout
            ),
            self.stdout,
        )

    def test_metadata_and_plot(self):
        self.assertEqual(self.result["model"]["hidden_size"], QUICK_DIMS.hidden_size)
        self.assertIn("cpu", self.result["machine"])
        self.assertGreater(os.path.getsize(os.path.join(self.out, report.PLOT_NAME)), 0)

    def test_delegate_inplace_timed_in_cpp(self):
        repeats = self.result["settings"]["repeats"]
        self.assertIn("decode_step_cpp", self.result["settings"]["cpp_timing"])
        self.assertIn("C++ median ms", self.stdout)
        for (variant, capacity), r in self.rows.items():
            for field in decode.CPP_FIELDS:
                self.assertIn(field, r, f"{variant}@{capacity}")
            self.assertIsNone(r["cpp_error"], f"{variant}@{capacity}")
            if variant not in cpp_timing.CPP_VARIANTS:
                self.assertIsNone(r["step_ms_cpp_median"], f"{variant}@{capacity}")
                continue
            samples = r["step_ms_cpp_samples"]
            self.assertLen(samples, repeats, f"{variant}@{capacity}")
            self.assertTrue(all(t > 0 for t in samples), f"{variant}@{capacity}: {samples}")
            self.assertLessEqual(r["step_ms_cpp_p10"], r["step_ms_cpp_median"])
            self.assertLessEqual(r["step_ms_cpp_median"], r["step_ms_cpp_p90"])
            self.assertGreaterEqual(r["cpp_threads"], 1)

    def test_cpp_binary_rejects_bad_input_naming_it(self):
        capacity = self.capacities[0]
        pte = os.path.join(self.out, "programs", f"delegate_inplace_{capacity}.pte")
        self.assertTrue(os.path.isfile(pte), pte)
        corrupt = os.path.join(self.out, "corrupt.pte")
        with open(pte, "rb") as src, open(corrupt, "wb") as dst:
            dst.write(src.read()[:2000])
        config = quick_config(threads=1)
        built = BuiltProgram(
            "delegate_inplace",
            capacity,
            path=pte,
            cache_shapes=(workload.cache_shapes(workload.eager_module(config, capacity))),
        )
        binary, *good = cpp_timing.command(config, built, os.path.join(self.out, "cpp.json"))
        flags = dict(zip(good[::2], good[1::2]))

        def argv(**changes):
            """The good command line's flags with `changes` (--max-seq-len: max_seq_len=...;
            None drops a flag)."""
            merged = {**flags, **{f"--{k.replace('_', '-')}": v for k, v in changes.items()}}
            return [x for k, v in merged.items() if v is not None for x in (k, v)]

        missing = os.path.join(self.out, "nope.pte")
        for args, expect in (
            (argv(model=missing), missing),
            (argv(model=corrupt), corrupt),
            (argv(caches=flags["--caches"].replace("key_cache_0", "no_such")), "no_such"),
            (argv(max_seq_len=str(capacity * 2)), "--max-seq-len"),
            (argv(max_seq_len="4"), "--max-seq-len"),
            (argv(repeats="0"), "--repeats"),
            (argv(prompt="1,x"), "--prompt"),
            (argv(prompt="1,2"), "--prompt has 2"),
            (argv(token=str(QUICK_DIMS.vocab_size)), "--token"),
            (argv(caches=None), "--caches is required"),
            (argv(json=os.path.join(missing, "out.json")), "--json"),
            ([*argv(), "--no-such-flag", "1"], "--no-such-flag"),
        ):
            proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 2, f"{args}: {proc.stderr[-2000:]}")
            self.assertIn(expect, proc.stderr, args)

    def test_delegate_inplace_copies_no_cache_bytes(self):
        for s in self.capacities:
            r = self.row("delegate_inplace", s)
            self.assertEqual(r["cache_bytes_copied_per_step"], 0, f"at {s}")
            self.assertEqual(r["delegate_bytes_copied_per_step"], 0, f"at {s}")

    def test_copy_back_copies_the_whole_cache(self):
        for s in self.capacities:
            r = self.row("delegate_copy_back", s)
            self.assertEqual(r["cache_nbytes"], QUICK_DIMS.cache_nbytes(s))
            self.assertEqual(r["cache_bytes_copied_per_step"], r["cache_nbytes"], f"at {s}")
            self.assertGreaterEqual(r["runtime_bytes_copied_per_step"], r["cache_nbytes"])

    def test_weights_stored_once_and_external_weights_leave_the_pte(self):
        """The size targets: the in-place .pte holds its weights once (two methods use them)
        and the external variant's .ptd holds them once while its .pte keeps none."""
        for s in self.capacities:
            inside, outside = self.row("delegate_inplace", s), self.row("delegate_external", s)
            weights = inside["weights_bytes"]
            self.assertGreater(weights, 0)
            self.assertIsNone(inside["data_bytes"])
            self.assertGreaterEqual(inside["program_bytes"], weights)
            self.assertLess(inside["program_bytes"], 2 * weights, f"at {s}: weights twice?")
            self.assertGreaterEqual(outside["data_bytes"], weights)
            self.assertLess(outside["data_bytes"], weights + 64 * 1024, f"at {s}")
            self.assertLess(outside["program_bytes"], inside["program_bytes"] - weights // 2)
            self.assertEqual(outside["cache_bytes_copied_per_step"], 0, f"at {s}")

    def test_plain_executorch_default_writes_the_cache_back(self):
        for s in self.capacities:
            default = self.row("executorch_default", s)
            self.assertEqual(default["cache_bytes_copied_per_step"], default["cache_nbytes"])
            self.assertEqual(self.row("executorch_reinplace", s)["cache_bytes_copied_per_step"], 0)
            # XNNPACK + the reinplace pass: the cache update stays index_put_ on the buffer.
            self.assertEqual(self.row("executorch_xnnpack", s)["cache_bytes_copied_per_step"], 0)

    def test_from_json_rejudges_an_earlier_run(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = decode.main(["--from-json", os.path.join(self.out, report.JSON_NAME)])
        self.assertEqual(code, 0)
        text = out.getvalue()
        for variant in VARIANTS:
            self.assertIn(variant, text)
        self.assertIn("C++ median ms", text)
        for name, _, _ in report.check_targets(self.result["rows"]):
            self.assertIn(name, text)

    def test_bad_flags_exit_2_naming_the_flag(self):
        not_a_dir = os.path.join(self.out, report.JSON_NAME)  # an existing regular file
        fieldless = os.path.join(self.out, "row_without_samples.json")
        with open(fieldless, "w") as f:
            rows = [
                {k: v for k, v in r.items() if k != "step_ms_samples"} for r in self.result["rows"]
            ]
            json.dump({**self.result, "rows": rows}, f)
        zero_times = os.path.join(self.out, "zero_times.json")  # ratios would divide by zero
        with open(zero_times, "w") as f:
            rows = [
                {**r, "step_ms_samples": [0.0] * len(r["step_ms_samples"])}
                for r in self.result["rows"]
            ]
            json.dump({**self.result, "rows": rows}, f)
        nested = os.path.join(self.out, "nested.json")  # deeper than the JSON parser recurses
        with open(nested, "w") as f:
            f.write("[" * 200000)
        command_line_testing.assert_each_exits_2(
            self,
            decode.main,
            [
                (["--repeats", "0"], "--repeats"),
                (["--from-json", zero_times], "--from-json"),
                (["--from-json", nested], "--from-json"),
                (["--lead-in-ms", "-1"], "--lead-in-ms"),
                (["--lead-in-ms", "nan"], "--lead-in-ms"),
                (["--lead-in-ms", "1e308"], "--lead-in-ms"),
                (["--max-seq-lens", "abc"], "--max-seq-lens"),
                (["--variants", "nope"], "--variants"),
                (["--no-such-flag"], "--no-such-flag"),
                (["--quick", "--out", not_a_dir], "--out"),
                (["--from-json", self.out], "--from-json"),
                (["--from-json", fieldless], "step_ms_samples"),
                (["--from-json", os.path.join(self.out, "nope.json")], "--from-json"),
                (["--max-seq-len", "256"], "--max-seq-lens"),
                (_worker_argv("time", '{"eager": null}'), "--config-json"),
                (["--programs", "{}"], "--programs"),
                (_worker_argv("profile", '{"eager": "x.pte"}'), "--programs"),
                (_worker_argv("time", '{"nope": null}'), "--programs"),
                (["--quick", "--max-seq-lens", "4"], "--max-seq-lens"),
            ],
        )


if __name__ == "__main__":
    absltest.main()
