"""Unit tests of the benchmark's target checks (report.py) on synthetic rows: the paired ratio
cancels machine phases shared by both variants, the growth interval brackets the true
relative growth, and each target (speed: against eager, every plain ExecuTorch variant,
growth with the capacity; size: program and data sizes against the weights, memory
against plain ExecuTorch) flips to MISSED when its rule is broken; the table names each row's
engine."""

import random
import statistics

from absl.testing import absltest

from benchmarks import report


def phased(n, seed):
    """Per-round machine speed: phases of ~8 rounds at 1.0x or 1.5x, like the 2-CPU machine."""
    rng = random.Random(seed)
    out, level = [], 1.0
    while len(out) < n:
        level = 1.5 if level == 1.0 else 1.0
        out += [level] * rng.randint(4, 12)
    return out[:n]


WEIGHTS = 10 * 1024 * 1024


def row(variant, capacity, samples, cache_bytes=0):
    """A row; sizes and memory that meet the size targets (the delegate's .pte 1.01x the
    weights, the external one 100 KiB beside a 1.001x .ptd, 20 MB over baseline for all)."""
    sizes = {
        "delegate_inplace": (int(1.01 * WEIGHTS), None),
        "delegate_external": (100 * 1024, int(1.001 * WEIGHTS)),
    }
    program, data = sizes.get(variant, (WEIGHTS + 4096, None))
    return {
        "variant": variant,
        "max_seq_len": capacity,
        "error": None,
        "step_ms_samples": samples,
        "step_ms_median": statistics.median(samples),
        "cache_bytes_copied_per_step": cache_bytes,
        "cache_nbytes": capacity * 1000,
        "program_bytes": program,
        "data_bytes": data,
        "weights_bytes": WEIGHTS,
        "peak_rss_mb": 400.0,
        "baseline_rss_mb": 380.0,
    }


def rows_for(inplace_cost, plain_cost, n=100, jitter_pct=2, eager_cost=None):
    """Rows at capacities 256 and 4096; step = base cost x phase x (1 +- jitter). Eager costs
    `eager_cost` (default 1.5x the plain cost at 256, flat), executorch_default 1.2x and
    executorch_xnnpack 1.1x the plain (executorch_reinplace) cost."""
    rng = random.Random(7)
    rows = []
    eager_cost = eager_cost or dict.fromkeys(plain_cost, 1.5 * plain_cost[256])
    for capacity in (256, 4096):
        speed = phased(n, capacity)
        jitter = lambda: 1 + rng.uniform(-jitter_pct, jitter_pct) / 100  # noqa: E731
        rows.append(row("eager", capacity, [eager_cost[capacity] * s * jitter() for s in speed]))
        rows.append(
            row(
                "executorch_reinplace",
                capacity,
                [plain_cost[capacity] * s * jitter() for s in speed],
            )
        )
        rows.append(
            row(
                "executorch_default",
                capacity,
                [plain_cost[capacity] * 1.2 * s * jitter() for s in speed],
            )
        )
        rows.append(
            row(
                "executorch_xnnpack",
                capacity,
                [plain_cost[capacity] * 1.1 * s * jitter() for s in speed],
            )
        )
        rows.append(
            row(
                "delegate_inplace", capacity, [inplace_cost[capacity] * s * jitter() for s in speed]
            )
        )
        rows.append(
            row(
                "delegate_copy_back",
                capacity,
                [inplace_cost[capacity] * s * jitter() for s in speed],
                cache_bytes=capacity * 1000,
            )
        )
        rows.append(
            row(
                "delegate_external",
                capacity,
                [inplace_cost[capacity] * s * jitter() for s in speed],
            )
        )
    return rows


def targets(rows):
    return {name: met for name, met, _ in report.check_targets(rows)}


RATIO = "delegate in-place <= 1.00x executorch_reinplace"
GROWTH = "delegate in-place growth <= executorch_reinplace's"
OWN_GROWTH = "delegate in-place growth smallest->largest capacity <= 1.30x"
EAGER = "delegate in-place <= 1.00x eager"
EAGER_4096 = "delegate in-place <= 0.60x eager at 4096"
#: Plain ExecuTorch's costs, and a delegate well under them and under eager (every target).
PLAIN = {256: 20.0, 4096: 80.0}
FAST = {256: 10.0, 4096: 12.0}


class PairedRatioTest(absltest.TestCase):
    def test_cancels_shared_phases(self):
        speed = phased(100, 1)
        b = [10.0 * s for s in speed]
        self.assertAlmostEqual(report.paired_ratio([10.5 * s for s in speed], b), 1.05)
        self.assertAlmostEqual(report.paired_ratio(b, [10.5 * s for s in speed]), 1 / 1.05)

    def test_robust_where_the_ratio_of_medians_is_not(self):
        # 50 fast and 50 slow rounds; in 3 rounds the machine turned slow between b's step and
        # a's. Per round a is 1.05x b; a median of the marginals lands in different phases.
        speed = ([1.0] * 10 + [1.5] * 10) * 5
        b = [10.0 * s for s in speed]
        a = [10.5 * s for s in speed]
        for i in (9, 49, 89):
            a[i] = 10.5 * 1.5
        self.assertAlmostEqual(report.paired_ratio(a, b), 1.05)
        self.assertGreater(statistics.median(a) / statistics.median(b), 1.2)

    def test_rejects_unpaired_lengths(self):
        with self.assertRaisesRegex(ValueError, "equal"):
            report.paired_ratio([1.0, 2.0], [1.0])

    def test_growth_interval_brackets_the_truth(self):
        rows = rows_for({256: 20.0, 4096: 80.0 * 1.06}, PLAIN)
        s = {(r["variant"], r["max_seq_len"]): r["step_ms_samples"] for r in rows}
        est, low, high = report.relative_growth(
            s[("delegate_inplace", 256)],
            s[("executorch_reinplace", 256)],
            s[("delegate_inplace", 4096)],
            s[("executorch_reinplace", 4096)],
        )
        self.assertLess(low, 1.06)
        self.assertGreater(high, 1.06)
        self.assertAlmostEqual(est, 1.06, delta=0.02)


class TargetsTest(absltest.TestCase):
    def test_fast_in_place_meets_every_target(self):
        got = targets(rows_for(FAST, PLAIN))
        self.assertTrue(all(got.values()), got)
        self.assertLen(got, 17)

    def test_slower_in_place_misses_the_ratio(self):
        got = targets(rows_for({256: 21.0, 4096: 84.0}, PLAIN))
        self.assertFalse(got[RATIO], got)
        self.assertTrue(got[GROWTH], got)  # 1.05x at both capacities: the same growth
        # executorch_default is 1.2x and executorch_xnnpack 1.1x executorch_reinplace.
        self.assertTrue(got["delegate in-place <= 1.00x executorch_default"], got)
        self.assertTrue(got["delegate in-place <= 1.00x executorch_xnnpack"], got)

    def test_faster_growth_misses_the_growth_target(self):
        got = targets(rows_for({256: 18.0, 4096: 77.0}, PLAIN))
        self.assertTrue(got[RATIO], got)
        self.assertFalse(got[GROWTH], got)

    def test_growth_with_the_capacity_misses_the_own_growth_target(self):
        got = targets(rows_for({256: 10.0, 4096: 14.0}, PLAIN))
        self.assertFalse(got[OWN_GROWTH], got)
        self.assertTrue(got[EAGER], got)

    def test_eager_targets(self):
        # 0.9x eager at 256 but 0.7x at 4096: under eager everywhere, not 0.6x at 4096.
        got = targets(
            rows_for(FAST, PLAIN, eager_cost={256: FAST[256] / 0.9, 4096: FAST[4096] / 0.7})
        )
        self.assertTrue(got[EAGER], got)
        self.assertFalse(got[EAGER_4096], got)
        got = targets(rows_for(FAST, PLAIN, eager_cost={256: 9.0, 4096: 40.0}))
        self.assertFalse(got[EAGER], got)
        self.assertTrue(got[EAGER_4096], got)

    def test_cache_bytes_flip_the_byte_targets(self):
        rows = rows_for(FAST, PLAIN)
        for r in rows:
            if r["variant"] == "delegate_inplace":
                r["cache_bytes_copied_per_step"] = 64
            if r["variant"] == "delegate_copy_back":
                r["cache_bytes_copied_per_step"] = 0
        got = targets(rows)
        self.assertFalse(got["delegate in-place copies 0 cache bytes/step"], got)
        self.assertFalse(got["copy_back copies the whole cache each step"], got)

    def test_sizes_and_memory_flip_the_size_and_memory_targets(self):
        def judged(variant, **changes):
            rows = rows_for(FAST, PLAIN)
            for r in rows:
                if r["variant"] == variant and r["max_seq_len"] == 4096:
                    r.update(changes)
            return targets(rows)

        program = "delegate in-place .pte <= 1.05x weights + 256.0 KiB"
        got = judged("delegate_inplace", program_bytes=int(1.05 * WEIGHTS) + 256 * 1024 + 1)
        self.assertFalse(got[program], got)
        self.assertTrue(
            judged("delegate_inplace", program_bytes=int(1.05 * WEIGHTS) + 256 * 1024)[program]
        )
        got = judged("delegate_external", program_bytes=256 * 1024 + 1)
        self.assertFalse(got["delegate external .pte <= 256.0 KiB"], got)
        got = judged("delegate_external", data_bytes=int(1.021 * WEIGHTS))
        self.assertFalse(got["delegate external .ptd <= 1.02x weights"], got)
        self.assertTrue(got["delegate external .pte <= 256.0 KiB"], got)
        # 21.1 MB over baseline against plain's 20 MB: over 1.05x.
        got = judged("delegate_inplace", peak_rss_mb=401.1)
        self.assertFalse(got["delegate in-place RSS over baseline <= 1.05x executorch_xnnpack's"])
        got = judged("executorch_reinplace", peak_rss_mb=399.0)
        self.assertFalse(
            got["delegate in-place RSS over baseline <= 1.05x executorch_reinplace's"], got
        )
        self.assertTrue(got["delegate in-place RSS over baseline <= 1.05x executorch_default's"])
        rows = [r for r in rows_for(FAST, PLAIN) if r["variant"] != "delegate_external"]
        got = {name: (met, detail) for name, met, detail in report.check_targets(rows)}
        self.assertEqual(
            got["delegate external .ptd <= 1.02x weights"], (None, "delegate_external not selected")
        )

    def test_absent_variants_are_not_applicable_and_say_why(self):
        rows = [
            r for r in rows_for(FAST, PLAIN) if r["variant"] not in ("delegate_copy_back", "eager")
        ]
        rows[0] = {**rows[0], "error": "run failed (exit 1): boom"}  # executorch_reinplace@256
        got = {name: (met, detail) for name, met, detail in report.check_targets(rows)}
        self.assertEqual(
            got["copy_back copies the whole cache each step"],
            (None, "delegate_copy_back not selected"),
        )
        self.assertEqual(got[RATIO], (None, "executorch_reinplace failed"))
        self.assertEqual(got[EAGER], (None, "eager not selected"))
        self.assertTrue(got["delegate in-place <= 1.00x executorch_default"][0])

    def test_capacity_4096_not_measured(self):
        rows = [r for r in rows_for(FAST, PLAIN) if r["max_seq_len"] == 256]
        got = {name: (met, detail) for name, met, detail in report.check_targets(rows)}
        self.assertEqual(got[EAGER_4096], (None, "4096 positions not measured"))
        self.assertEqual(got[OWN_GROWTH], (None, "needs two capacities"))
        self.assertTrue(got[EAGER][0])

    def test_growth_far_above_is_missed_even_with_a_wide_interval(self):
        # 3x the plain growth with ~+-10% per-round spread and few rounds: the interval is
        # wider than 0.10 but lies wholly above 1.0.
        got = targets(rows_for({256: 10.0, 4096: 120.0}, PLAIN, n=20, jitter_pct=10))
        self.assertFalse(got[GROWTH], got)

    def test_too_few_rounds_cannot_decide_growth(self):
        # Per-round ratios spread like this machine's (~+-10%), but only 4 rounds.
        got = targets(rows_for(PLAIN, PLAIN, n=4, jitter_pct=10))
        self.assertIsNone(got[GROWTH], got)
        got = targets(rows_for(PLAIN, PLAIN, n=400, jitter_pct=10))
        self.assertTrue(got[GROWTH], got)


class TableTest(absltest.TestCase):
    def table_row(self, variant, **fields):
        return {
            "variant": variant,
            "max_seq_len": 256,
            "error": None,
            "step_ms_median": 2.0,
            "step_ms_p10": 1.5,
            "step_ms_p90": 3.0,
            "runtime_bytes_copied_per_step": 0,
            "cache_bytes_copied_per_step": 0,
            "peak_rss_mb": 400.0,
            "baseline_rss_mb": 380.0,
            **fields,
        }

    def test_cpp_column_shows_the_median_dash_or_failed(self):
        text = report.table(
            [
                self.table_row("eager"),  # written before the C++ fields existed
                self.table_row("executorch_default", step_ms_cpp_median=None, cpp_error=None),
                self.table_row("delegate_inplace", step_ms_cpp_median=0.5859, cpp_error=None),
                self.table_row(
                    "delegate_copy_back",
                    step_ms_cpp_median=None,
                    cpp_error="decode_step_cpp failed (exit 1): boom",
                ),
            ],
            [],
        )
        lines = text.splitlines()
        self.assertIn("C++ median ms", lines[0])
        column = lines[0].index("C++ median ms")
        cells = [line[column:].split()[0] for line in lines[2:6]]
        self.assertEqual(cells, ["-", "-", "0.586", "failed"])
        self.assertEqual(
            lines[-1],
            "C++ timing of delegate_copy_back at 256 failed: decode_step_cpp failed (exit 1): boom",
        )

    def test_engine_column_and_header_lines(self):
        delegate = (
            "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program "
            "with XNNPACK, on the CPU)"
        )
        rows = [
            self.table_row("eager"),  # written before the engine fields existed
            self.table_row(
                "executorch_xnnpack",
                engine="XnnpackBackend",
                decode_delegates="9 XnnpackBackend delegates",
            ),
            self.table_row("delegate_inplace", engine="portable, CPU", decode_delegates=delegate),
            self.table_row(
                "delegate_inplace",
                max_seq_len=4096,
                engine="portable, CPU",
                decode_delegates=delegate,
            ),
            self.table_row(
                "delegate_copy_back",
                engine="portable, CPU",
                decode_delegates=delegate,
                error="run failed (exit 1): boom",
            ),
        ]
        lines = report.table(rows, []).splitlines()
        column = lines[0].index("engine")
        self.assertEqual(lines[0].index("variant"), 0)
        self.assertLess(column, lines[0].index("max_seq_len"))
        cells = [line[column:].split("  ")[0] for line in lines[2:7]]
        self.assertEqual(
            cells, ["-", "XnnpackBackend", "portable, CPU", "portable, CPU", "portable, CPU"]
        )
        self.assertRegex(lines[6], r"^delegate_copy_back +portable, CPU +256 +FAILED: run failed")
        # One header line per variant that recorded it, in row order.
        self.assertEqual(
            report.engines_block(rows),
            [
                "what runs each decode step (read from each variant's program):",
                "  executorch_xnnpack  9 XnnpackBackend delegates",
                f"  delegate_inplace    {delegate}",
                f"  delegate_copy_back  {delegate}",
            ],
        )
        self.assertEqual(report.engines_block(rows[:1]), [])

    def test_after_switch_note(self):
        rows = [
            self.table_row("delegate_inplace", max_seq_len=256, step_ms_after_switch_median=1.0),
            self.table_row("delegate_inplace", max_seq_len=4096, step_ms_after_switch_median=1.5),
            self.table_row("eager", max_seq_len=4096, step_ms_after_switch_median=9.0),
        ]
        self.assertEqual(
            report.after_switch_note(rows),
            "  (not judged) delegate in-place step right after another "
            "variant's, growth 256->4096: 1.50x (1.000 -> 1.500 ms)",
        )
        # One capacity, or JSON written before the field existed: no note.
        self.assertIsNone(report.after_switch_note(rows[:1] + rows[2:]))
        self.assertIsNone(
            report.after_switch_note(
                [self.table_row("delegate_inplace", max_seq_len=c) for c in (256, 4096)]
            )
        )
        # A zero or NaN median (a hand-edited file) is no measurement: no note, no crash.
        for bad in (0.0, float("nan")):
            rows[0]["step_ms_after_switch_median"] = bad
            self.assertIsNone(report.after_switch_note(rows), bad)


if __name__ == "__main__":
    absltest.main()
