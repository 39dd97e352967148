"""Unit tests of the benchmark's target checks (report.py) on synthetic rows: the paired ratio
cancels machine phases shared by both variants, the growth interval brackets the true
relative growth, and each target flips to MISSED when its rule is broken."""

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


def row(variant, capacity, samples, cache_bytes=0):
    return {"variant": variant, "max_seq_len": capacity, "error": None,
            "step_ms_samples": samples, "step_ms_median": statistics.median(samples),
            "cache_bytes_copied_per_step": cache_bytes, "cache_nbytes": capacity * 1000}


def rows_for(inplace_cost, plain_cost, n=100, jitter_pct=2):
    """Rows at capacities 256 and 4096; step = base cost x phase x (1 +- jitter)."""
    rng = random.Random(7)
    rows = []
    for capacity in (256, 4096):
        speed = phased(n, capacity)
        jitter = lambda: 1 + rng.uniform(-jitter_pct, jitter_pct) / 100  # noqa: E731
        rows.append(row("executorch_reinplace", capacity,
                        [plain_cost[capacity] * s * jitter() for s in speed]))
        rows.append(row("executorch_default", capacity,
                        [plain_cost[capacity] * 1.2 * s * jitter() for s in speed]))
        rows.append(row("delegate_inplace", capacity,
                        [inplace_cost[capacity] * s * jitter() for s in speed]))
        rows.append(row("delegate_copy_back", capacity,
                        [inplace_cost[capacity] * s * jitter() for s in speed],
                        cache_bytes=capacity * 1000))
    return rows


def targets(rows):
    return {name: met for name, met, _ in report.check_targets(rows)}


RATIO = "delegate in-place <= 1.10x executorch_reinplace"
GROWTH = "delegate in-place growth <= executorch_reinplace's"


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
        rows = rows_for({256: 20.0, 4096: 80.0 * 1.06}, {256: 20.0, 4096: 80.0})
        s = {(r["variant"], r["max_seq_len"]): r["step_ms_samples"] for r in rows}
        est, low, high = report.relative_growth(
            s[("delegate_inplace", 256)], s[("executorch_reinplace", 256)],
            s[("delegate_inplace", 4096)], s[("executorch_reinplace", 4096)])
        self.assertLess(low, 1.06)
        self.assertGreater(high, 1.06)
        self.assertAlmostEqual(est, 1.06, delta=0.02)


class TargetsTest(absltest.TestCase):

    def test_equal_costs_meet_every_target(self):
        got = targets(rows_for({256: 20.0, 4096: 80.0}, {256: 20.0, 4096: 80.0}))
        self.assertTrue(all(got.values()), got)

    def test_slower_in_place_misses_the_ratio(self):
        got = targets(rows_for({256: 23.0, 4096: 92.0}, {256: 20.0, 4096: 80.0}))
        self.assertFalse(got[RATIO], got)
        self.assertTrue(got[GROWTH], got)  # 1.15x at both capacities: the same growth
        # executorch_default is 1.2x slower than executorch_reinplace: 23 vs 24 meets it.
        self.assertTrue(got["delegate in-place <= 1.10x executorch_default"], got)

    def test_faster_growth_misses_the_growth_target(self):
        got = targets(rows_for({256: 20.0, 4096: 86.0}, {256: 20.0, 4096: 80.0}))
        self.assertTrue(got[RATIO], got)
        self.assertFalse(got[GROWTH], got)

    def test_cache_bytes_flip_the_byte_targets(self):
        rows = rows_for({256: 20.0, 4096: 80.0}, {256: 20.0, 4096: 80.0})
        for r in rows:
            if r["variant"] == "delegate_inplace":
                r["cache_bytes_copied_per_step"] = 64
            if r["variant"] == "delegate_copy_back":
                r["cache_bytes_copied_per_step"] = 0
        got = targets(rows)
        self.assertFalse(got["delegate in-place copies 0 cache bytes/step"], got)
        self.assertFalse(got["copy_back copies the whole cache each step"], got)

    def test_absent_variants_are_not_applicable_and_say_why(self):
        rows = [r for r in rows_for({256: 20.0, 4096: 80.0}, {256: 20.0, 4096: 80.0})
                if r["variant"] != "delegate_copy_back"]
        rows[0] = {**rows[0], "error": "run failed (exit 1): boom"}  # executorch_reinplace@256
        got = {name: (met, detail) for name, met, detail in report.check_targets(rows)}
        self.assertEqual(got["copy_back copies the whole cache each step"],
                         (None, "delegate_copy_back not selected"))
        self.assertEqual(got[RATIO], (None, "executorch_reinplace failed"))
        self.assertTrue(got["delegate in-place <= 1.10x executorch_default"][0])

    def test_too_few_rounds_cannot_decide_growth(self):
        # Per-round ratios spread like this machine's (~+-10%), but only 4 rounds.
        got = targets(rows_for({256: 20.0, 4096: 80.0}, {256: 20.0, 4096: 80.0}, n=4,
                               jitter_pct=10))
        self.assertIsNone(got[GROWTH], got)
        got = targets(rows_for({256: 20.0, 4096: 80.0}, {256: 20.0, 4096: 80.0}, n=400,
                               jitter_pct=10))
        self.assertTrue(got[GROWTH], got)


if __name__ == "__main__":
    absltest.main()
