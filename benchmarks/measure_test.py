"""Unit test of the timing worker's schedule (measure.time_interleaved) with recorded fake
steps and a fake clock: every round runs each variant once, in a shuffled order (seeded: the
same in every run) under which each variant follows each other one; warm-up runs before any
timed step; with a lead-in, a variant's steps run back to back for at least `lead_in_ms`
before its steady step, and the first of them is the after-switch sample."""

import itertools
from unittest import mock

from absl.testing import absltest

from benchmarks import measure
from benchmarks.bench_config import quick_config

NAMES = ["eager", "executorch_default", "delegate_inplace"]
PROGRAMS = {"eager": None, "executorch_default": "a.pte", "delegate_inplace": "b.pte"}
# Fake step durations (s): a step right after another variant's is slower, as measured.
AFTER_SWITCH_S, BACK_TO_BACK_S = 1.0, 0.5
REPEATS = 30


class InOrder:
    """Stands in for random.Random: every round in the variants' own order (the last variant
    of a round is never the first of the next, so every run starts after a switch)."""

    def __init__(self, seed):
        pass

    def sample(self, names, k):
        return list(names)[:k]


class TimeInterleavedTest(absltest.TestCase):
    def run_worker(self, lead_in_ms, shuffle=True):
        """(the variants' steps in call order, time_interleaved's result)."""
        calls, clock = [], [0.0]

        def fake_prepare(config, variant, max_seq_len, path):
            def step():
                same = bool(calls) and calls[-1] == variant
                clock[0] += BACK_TO_BACK_S if same else AFTER_SWITCH_S
                calls.append(variant)

            return step

        config = quick_config(1).replace(repeats=REPEATS, warmup=2, lead_in_ms=lead_in_ms)
        with (
            mock.patch.object(measure, "prepare_step", fake_prepare),
            mock.patch.object(measure, "import_common_modules"),
            mock.patch.object(measure, "set_threads"),
            mock.patch.object(measure.time, "perf_counter", lambda: clock[0]),
            mock.patch.object(
                measure.random, "Random", measure.random.Random if shuffle else InOrder
            ),
        ):
            result = measure.time_interleaved(config, 32, PROGRAMS)
        return calls, result

    def test_shuffled_rounds(self):
        calls, result = self.run_worker(lead_in_ms=0)
        warmup, timed = calls[: 2 * len(NAMES)], calls[2 * len(NAMES) :]
        self.assertEqual(warmup, NAMES * 2)
        rounds = [timed[i : i + len(NAMES)] for i in range(0, len(timed), len(NAMES))]
        self.assertLen(rounds, REPEATS)
        for r, order in enumerate(rounds):
            self.assertCountEqual(order, NAMES, f"round {r}")
        # Each variant runs right after each other one in some round (a rotation would give
        # every variant one fixed predecessor), and the schedule is the same in every run.
        pairs = {(a, b) for order in rounds for a, b in itertools.pairwise(order)}
        self.assertEqual(pairs, {(a, b) for a in NAMES for b in NAMES if a != b})
        self.assertGreater(len({tuple(order) for order in rounds}), 3)
        again, result_again = self.run_worker(lead_in_ms=0)
        self.assertEqual(again, calls)
        self.assertEqual(result_again, result)
        # Without a lead-in the steady step is the step after a switch.
        self.assertEqual(sorted(result), ["after_switch", "steady"])
        for v in NAMES:
            self.assertLen(result["steady"][v], REPEATS, v)
            self.assertEqual(result["steady"][v], result["after_switch"][v], v)

    def test_lead_in_runs_back_to_back_for_lead_in_ms(self):
        # 1.2 s of lead-in: the after-switch step (1.0 s) and one more (0.5 s), then the steady
        # step: three steps of each variant per round, back to back.
        calls, result = self.run_worker(lead_in_ms=1200, shuffle=False)
        self.assertEqual(calls[: 2 * len(NAMES)], NAMES * 2)
        expected_round = [v for v in NAMES for _ in range(3)]
        self.assertEqual(calls[2 * len(NAMES) :], expected_round * REPEATS)
        for v in NAMES:
            self.assertEqual(result["steady"][v], [BACK_TO_BACK_S * 1e3] * REPEATS, v)
            self.assertEqual(result["after_switch"][v], [AFTER_SWITCH_S * 1e3] * REPEATS, v)
        # A lead-in shorter than the first step: that step alone, then the steady step.
        calls, _ = self.run_worker(lead_in_ms=1, shuffle=False)
        self.assertEqual(calls[2 * len(NAMES) :], [v for v in NAMES for _ in range(2)] * REPEATS)


if __name__ == "__main__":
    absltest.main()
