"""Runs the generation benchmark in quick mode (the tiny model, 48 positions, one generation)
and checks the structure of its output, the byte counts and the tokens, never the timings:

* every variant has a row, without error, with its fields; the exit status is 0;
* every variant's greedy tokens equal eager's over the whole generation (the prefill's token
  and one per decode position), every generation decoded the same tokens, and the prompt's
  logits are within 1e-3 of eager's;
* one step time per decode position per generation; each segment's first step is marked and
  left out of the decode statistics; one prefill time per repeat and prompt length;
* the roofline: the weight bytes a token reads follow the stated rule (every parameter once,
  an untied input embedding one row), and the minimum ms/token is those bytes / the measured
  bandwidth;
* every program holds each weight once (its size is at least the parameters' and less than
  twice; with external weights the `.ptd` does, within the decode benchmark's bounds, and
  the `.pte` is at most `report.MAX_EXTERNAL_PTE`),
  and each row names what runs its decode step, read off its program;
* bad flags exit 2.
"""

import os

from absl.testing import absltest

from benchmarks import command_line_testing, generate, generate_report, report
from benchmarks.generate_config import TINY, quick_config
from benchmarks.generate_variants import VARIANTS

FIELDS = (
    "decode_ms_median",
    "end_ms_median",
    "tok_s_median",
    "tok_s_end",
    "roofline_fraction_median",
    "roofline_fraction_end",
    "prefill_ms",
    "tokens",
)
ENGINES = {
    "eager": "eager PyTorch",
    "delegate_inplace": "portable, CPU",
    "delegate_external": "portable, CPU",
    "executorch_xnnpack": "XnnpackBackend",
    "executorch_llm_recipe": "XnnpackBackend",
    "delegate_8da4w": "portable, CPU",
    "executorch_llm_recipe_8da4w": "XnnpackBackend",
}
#: Each 8da4w variant and its float32 counterpart.
FLOAT_OF = {
    "delegate_8da4w": "delegate_inplace",
    "executorch_llm_recipe_8da4w": "executorch_llm_recipe",
}


def _parameter_bytes(d) -> int:
    """Every parameter of the tiny untied model (float32)."""
    kv = d.num_key_value_heads * d.head_dim
    layer = (
        2 * d.hidden_size * d.hidden_size
        + 2 * d.hidden_size * kv
        + 3 * d.hidden_size * d.intermediate_size
        + 2 * d.hidden_size
    )
    return 4 * (d.num_hidden_layers * layer + d.hidden_size + 2 * d.vocab_size * d.hidden_size)


class GenerateQuickTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out, cls.exit_code, cls.stdout, cls.result = command_line_testing.quick_run(
            cls, generate.main, generate_report.JSON_NAME
        )
        cls.rows = {r["variant"]: r for r in cls.result["rows"]}
        cls.config = quick_config(1)

    def test_every_variant_ran_with_its_fields(self):
        self.assertEqual(set(self.rows), set(VARIANTS))
        for v, r in self.rows.items():
            self.assertIsNone(r["error"], f"{v}: {r['error']}")
            for field in FIELDS:
                if v in FLOAT_OF and field.startswith("roofline"):
                    continue  # a float32 roofline: not theirs
                self.assertIsNotNone(r[field], f"{v}: {field}")
            self.assertEqual(r["engine"], ENGINES[v], v)
        self.assertEqual(self.exit_code, 0)
        self.assertTrue(os.path.isfile(os.path.join(self.out, generate_report.PLOT_NAME)))

    def test_tokens_equal_eager(self):
        c = self.config
        n = c.max_seq_len - c.prompt_len + 1
        for v, r in self.rows.items():
            self.assertLen(r["tokens"], n, v)
            self.assertEqual(r["tokens_compared"], n, v)
            self.assertTrue(r["generations_consistent"], v)
            if v in FLOAT_OF:
                # Quantized: within the quantization error of eager's logits (int4 weights).
                self.assertLess(r["logits_max_abs_diff"], 0.5, v)
                self.assertIsNone(r["roofline_fraction_median"], v)
                continue
            self.assertTrue(r["tokens_equal"], f"{v} diverges at {r['first_divergence']}")
            self.assertLess(r["logits_max_abs_diff"], 1e-3, v)
            self.assertIn(f"equal ({n})", self.stdout)

    def test_step_and_prefill_counts(self):
        c = self.config
        positions = list(range(c.prompt_len, c.max_seq_len))
        self.assertEqual(self.result["settings"]["decode_positions"], positions)
        lens = [str(n) for n in c.effective_prefill_lens()]
        self.assertEqual(lens, ["8", "32"])
        first = [i % c.segment == 0 for i in range(len(positions))]
        for v, r in self.rows.items():
            self.assertLen(r["steps_ms"], c.repeats, v)
            for ms, marks in zip(r["steps_ms"], r["after_switch"]):
                self.assertLen(ms, len(positions), v)
                self.assertEqual(marks, first, v)
            self.assertEqual(r["steady_steps"], c.repeats * first.count(False), v)
            self.assertEqual(sorted(r["prefill_ms_samples"]), sorted(lens), v)
            for n in lens:
                self.assertLen(r["prefill_ms_samples"][n], c.prefill_repeats, v)

    def test_roofline_bytes(self):
        roof = self.result["roofline"]
        d = TINY.dims
        # Every parameter once, the untied input embedding table one row.
        want = _parameter_bytes(d) - 4 * (d.vocab_size - 1) * d.hidden_size
        self.assertEqual(roof["weight_bytes_per_token"], want)
        self.assertGreater(roof["bandwidth"]["bytes_per_s"], 0)
        self.assertAlmostEqual(
            roof["min_ms_per_token"], want / roof["bandwidth"]["bytes_per_s"] * 1e3
        )
        self.assertIn("roofline:", self.stdout)

    def test_programs_hold_each_weight_once(self):
        weights = _parameter_bytes(TINY.dims)
        for v, r in self.rows.items():
            if v == "eager":
                self.assertIsNone(r["program_bytes"])
                self.assertIsNone(r["export_s"])
                continue
            if v in FLOAT_OF:
                # int4 linears: smaller than the float32 program of the same kind.
                self.assertLess(r["program_bytes"], self.rows[FLOAT_OF[v]]["program_bytes"], v)
            elif v == "delegate_external":
                self.assertGreaterEqual(r["data_bytes"], weights, v)
                self.assertLessEqual(r["data_bytes"], report.MAX_PTD_WEIGHTS_RATIO * weights, v)
                self.assertLessEqual(r["program_bytes"], report.MAX_EXTERNAL_PTE, v)
            else:
                self.assertIsNone(r["data_bytes"], v)
                self.assertGreaterEqual(r["program_bytes"], weights, v)
                self.assertLess(r["program_bytes"], 2 * weights, v)
            self.assertGreater(r["export_s"], 0, v)
            self.assertGreaterEqual(r["export_peak_rss_mb"], r["export_baseline_rss_mb"], v)
            self.assertGreater(r["export_peak_tree_pss_mb"], 0, v)

    def test_bad_flags_exit_2(self):
        command_line_testing.assert_each_exits_2(
            self,
            generate.main,
            [
                (["--quick", "--max-seq-len", "10"], "--max-seq-len"),
                (["--quick", "--variants", "nope"], "--variants"),
                (["--quick", "--model", "smollm-135m"], "--model"),
                (["--repeats", "0"], "--repeats"),
            ],
        )


if __name__ == "__main__":
    absltest.main()
