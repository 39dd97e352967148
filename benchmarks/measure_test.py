"""Unit test of the timing worker's schedule (measure.time_interleaved) with recorded fake
steps and a fake clock: every round runs each variant's `lead_in + 1` steps back to back, the
variants in a shuffled order (seeded: the same in every run) under which each variant follows
each other one; warm-up runs before any timed step; each variant gets `repeats` steady and
`repeats` after-switch samples, taken from the right step of its run."""

from unittest import mock

from absl.testing import absltest

from benchmarks import measure
from benchmarks.bench_config import quick_config

NAMES = ["eager", "executorch_default", "delegate_inplace"]
PROGRAMS = {"eager": None, "executorch_default": "a.pte", "delegate_inplace": "b.pte"}
# Fake step durations (s): a step right after another variant's is slower, as measured.
AFTER_SWITCH_S, BACK_TO_BACK_S = 1.0, 0.5


class TimeInterleavedTest(absltest.TestCase):

    def run_worker(self, lead_in):
        """(the variants' steps in call order, time_interleaved's result)."""
        calls, clock = [], [0.0]

        def fake_prepare(config, variant, max_seq_len, path):
            def step():
                same = bool(calls) and calls[-1] == variant
                clock[0] += BACK_TO_BACK_S if same else AFTER_SWITCH_S
                calls.append(variant)
            return step

        config = quick_config(1).replace(repeats=30, warmup=2, lead_in=lead_in)
        with mock.patch.object(measure, "prepare_step", fake_prepare), \
                mock.patch.object(measure, "import_common_modules"), \
                mock.patch.object(measure, "set_threads"), \
                mock.patch.object(measure.time, "perf_counter", lambda: clock[0]):
            result = measure.time_interleaved(config, 32, PROGRAMS)
        return calls, result

    def test_shuffled_rounds_with_lead_in(self):
        calls, result = self.run_worker(lead_in=1)
        warmup, timed = calls[:2 * len(NAMES)], calls[2 * len(NAMES):]
        self.assertEqual(warmup, NAMES * 2)
        per_round = 2 * len(NAMES)
        rounds = [timed[i:i + per_round] for i in range(0, len(timed), per_round)]
        self.assertLen(rounds, 30)
        for r, steps in enumerate(rounds):
            # Each variant's lead-in and timed step run back to back.
            self.assertEqual(steps[0::2], steps[1::2], f"round {r}")
            self.assertCountEqual(steps[0::2], NAMES, f"round {r}")
        orders = [steps[0::2] for steps in rounds]
        # Each variant runs right after each other one in some round (a rotation would give
        # every variant one fixed predecessor), and the schedule is the same in every run.
        pairs = {(a, b) for order in orders for a, b in zip(order, order[1:])}
        self.assertEqual(pairs, {(a, b) for a in NAMES for b in NAMES if a != b})
        self.assertGreater(len({tuple(order) for order in orders}), 3)
        again, result_again = self.run_worker(lead_in=1)
        self.assertEqual(again, calls)
        self.assertEqual(result_again, result)
        self.assertEqual(sorted(result), ["after_switch", "steady"])
        for v in NAMES:
            self.assertEqual(result["steady"][v], [BACK_TO_BACK_S * 1e3] * 30, v)
            after = result["after_switch"][v]
            self.assertLen(after, 30, v)
            # The first step of a run follows another variant's, except when the variant
            # ended the previous round and starts this one.
            previous_last = [NAMES[-1]] + [order[-1] for order in orders[:-1]]  # warm-up first
            repeats_across_rounds = sum(
                1 for prev, order in zip(previous_last, orders) if prev == order[0] == v)
            self.assertEqual(after.count(AFTER_SWITCH_S * 1e3), 30 - repeats_across_rounds, v)

    def test_no_lead_in_times_the_step_after_a_switch(self):
        calls, result = self.run_worker(lead_in=0)
        self.assertLen(calls, 2 * len(NAMES) + 30 * len(NAMES))
        for v in NAMES:
            self.assertEqual(result["steady"][v], result["after_switch"][v], v)
            self.assertLen(result["steady"][v], 30, v)


if __name__ == "__main__":
    absltest.main()
