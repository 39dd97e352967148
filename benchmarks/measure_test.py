"""Unit test of the timing worker's schedule (measure.time_interleaved) with recorded fake
steps: every round runs each variant exactly once, in a shuffled order (seeded: the same in
every run) under which each variant follows each other one, warm-up runs before any timed
step, and each variant gets `repeats` samples."""

from unittest import mock

from absl.testing import absltest

from benchmarks import measure
from benchmarks.bench_config import quick_config

NAMES = ["eager", "executorch_default", "delegate_inplace"]


class TimeInterleavedTest(absltest.TestCase):

    def test_shuffled_rounds(self):
        calls = []

        def fake_prepare(config, variant, max_seq_len, path):
            return lambda: calls.append(variant)

        config = quick_config(1).replace(repeats=30, warmup=2)
        programs = {"eager": None, "executorch_default": "a.pte", "delegate_inplace": "b.pte"}
        with mock.patch.object(measure, "prepare_step", fake_prepare), \
                mock.patch.object(measure, "import_common_modules"), \
                mock.patch.object(measure, "set_threads"):
            times = measure.time_interleaved(config, 32, programs)
        warmup, timed = calls[:2 * len(NAMES)], calls[2 * len(NAMES):]
        self.assertEqual(warmup, NAMES * 2)
        rounds = [timed[i:i + len(NAMES)] for i in range(0, len(timed), len(NAMES))]
        self.assertLen(rounds, 30)
        for r, order in enumerate(rounds):
            self.assertCountEqual(order, NAMES, f"round {r}")
        # Each variant runs right after each other one in some round (a rotation would give
        # every variant one fixed predecessor), and the schedule is the same in every run.
        pairs = {(a, b) for order in rounds for a, b in zip(order, order[1:])}
        self.assertEqual(pairs, {(a, b) for a in NAMES for b in NAMES if a != b})
        self.assertGreater(len({tuple(order) for order in rounds}), 3)
        with mock.patch.object(measure, "prepare_step", fake_prepare), \
                mock.patch.object(measure, "import_common_modules"), \
                mock.patch.object(measure, "set_threads"):
            calls.clear()
            measure.time_interleaved(config, 32, programs)
        self.assertEqual(calls[2 * len(NAMES):], timed)
        self.assertEqual(sorted(times), sorted(NAMES))
        for variant, samples in times.items():
            self.assertLen(samples, 30, variant)
            self.assertTrue(all(t >= 0 for t in samples), variant)


if __name__ == "__main__":
    absltest.main()
