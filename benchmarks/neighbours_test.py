"""Unit test of decode_neighbours' schedule (neighbours.time_after) with recorded fake steps:
every timed step of the variant comes right after its `before` step at the same capacity,
each (before, capacity) pair gets `repeats` samples after `warmup` rounds, rounds are shuffled
(not one fixed order), and the `--before` and program-path parsing."""

import os
import tempfile
from unittest import mock

from absl.testing import absltest

from benchmarks import measure, neighbours
from benchmarks.bench_config import quick_config


class TimeAfterTest(absltest.TestCase):
    def test_each_timed_step_follows_its_before_step(self):
        calls = []

        def fake_prepare(config, variant, max_seq_len, path):
            return lambda: calls.append((variant, max_seq_len))

        config = quick_config(1).replace(max_seq_lens=(8, 16), repeats=7, warmup=2)
        befores = ["none", "executorch_xnnpack", "eager"]
        with (
            mock.patch.object(measure, "prepare_step", fake_prepare),
            mock.patch.object(measure, "import_common_modules"),
            mock.patch.object(measure, "set_threads"),
        ):
            times = neighbours.time_after(
                config, "delegate_inplace", befores, "/programs", steps_after=3
            )
        self.assertEqual(sorted(times), sorted((b, c) for b in befores for c in (8, 16)))
        for pair, per_step in times.items():
            self.assertLen(per_step, 3, pair)
            for samples in per_step:
                self.assertLen(samples, 7, pair)
                self.assertTrue(all(t >= 0 for t in samples), pair)
        timed = [i for i, (v, _) in enumerate(calls) if v == "delegate_inplace"]
        self.assertLen(timed, (2 + 7) * 6 * 3)  # warm-up and timed rounds, 6 pairs, 3 steps
        followed = {}
        for i in timed:
            cap = calls[i][1]
            prev = calls[i - 1] if i > 0 else None
            if prev is not None and prev[0] != "delegate_inplace":
                self.assertEqual(prev[1], cap, f"call {i}: before step at another capacity")
                followed[(prev[0], cap)] = followed.get((prev[0], cap), 0) + 1
                # The three steps run back to back at the pair's capacity.
                self.assertEqual(calls[i : i + 3], [("delegate_inplace", cap)] * 3, f"call {i}")
        # Each variant `before` runs right before every one of its pair's runs of steps.
        for b in ("executorch_xnnpack", "eager"):
            for cap in (8, 16):
                self.assertEqual(followed[(b, cap)], 9, (b, cap))

    def test_table_rows_per_step(self):
        times = {("eager", 256): [[1.0, 1.0], [0.5, 0.5]], ("eager", 4096): [[2.0], [0.6]]}
        self.assertEqual(
            neighbours.table("delegate_inplace", ["eager"], [256, 4096], times).splitlines()[2:],
            [
                "eager #1                   1.000     2.000    2.00x",
                "eager #2                   0.500     0.600    1.20x",
            ],
        )

    def test_rounds_are_shuffled_and_complete(self):
        rounds = neighbours.schedule(["none", "eager"], [256, 4096], 20)
        pairs = sorted((b, c) for b in ("none", "eager") for c in (256, 4096))
        for order in rounds:
            self.assertEqual(sorted(order), pairs)
        self.assertGreater(len({tuple(o) for o in rounds}), 1)
        self.assertEqual(rounds, neighbours.schedule(["none", "eager"], [256, 4096], 20))

    def test_parse_before(self):
        self.assertEqual(
            neighbours.parse_before("none, eager,sweep:64,idle:25,eager"),
            ["none", "eager", "sweep:64", "idle:25"],
        )
        for bad in ("", "sweep:0", "sweep:x", "idle", "nonsense"):
            with self.assertRaises(ValueError, msg=bad):
                neighbours.parse_before(bad)

    def test_program_path(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "delegate_external_256"))
            self.assertEqual(
                neighbours.program_path(d, "delegate_external", 256),
                os.path.join(d, "delegate_external_256", "program.pte"),
            )
            self.assertEqual(
                neighbours.program_path(d, "delegate_inplace", 256),
                os.path.join(d, "delegate_inplace_256.pte"),
            )
            self.assertIsNone(neighbours.program_path(d, "eager", 256))


if __name__ == "__main__":
    absltest.main()
