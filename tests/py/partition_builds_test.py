"""Partitions build side by side in worker processes (``backend.partition_builds``).

A three-method decoder (prefill, decode, read_state: three partitions) exported with worker
processes is byte for byte the program built in the calling process; the builds did run in
other processes; a build's error reaches the caller with its type and message, a worker that
dies is named, and a bad ``EXECUTORCH_TRT_BUILD_WORKERS`` is refused.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import unittest.mock
import warnings

import torch
from absl.testing import absltest

import decoder_models as dm
import executorch_trt
from executorch_trt.backend import partition_builds, preprocess
from executorch_trt.engines import portable


def _export(workers: str | None) -> bytes:
    env = {} if workers is None else {partition_builds.WORKERS_VARIABLE: workers}
    with unittest.mock.patch.dict(os.environ, env), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return executorch_trt.export(dm.export_methods(dm.TinyDecoder())).buffer


def _patched_build(build):
    """The portable engine with ``build``, where the preprocess looks engines up."""
    engine = dataclasses.replace(portable.ENGINE, build=build)
    return unittest.mock.patch.object(preprocess, "get_engine", lambda name: engine)


@absltest.skipIf(len(os.sched_getaffinity(0)) < 2, "needs two CPUs to build side by side")
class PartitionBuildsTest(absltest.TestCase):
    def test_workers_build_the_same_program_in_other_processes(self):
        pids_file = self.create_tempfile().full_path
        build = portable.ENGINE.build

        def recording(partition, aliases, options):
            with open(pids_file, "a") as f:
                f.write(f"{os.getpid()}\n")
            return build(partition, aliases, options)

        with _patched_build(recording):
            in_process = _export("1")
            with open(pids_file) as f:
                self.assertEqual(f.read().split(), [str(os.getpid())] * 3)
            open(pids_file, "w").close()
            in_workers = _export(None)
            with open(pids_file) as f:
                pids = f.read().split()
        self.assertLen(pids, 3)
        self.assertNotIn(str(os.getpid()), pids)
        self.assertLen(set(pids), 2)  # two CPUs: two workers for three partitions
        self.assertEqual(len(in_process), len(in_workers))
        self.assertTrue(in_process == in_workers, "the .pte differs between the two ways")

    def test_a_build_that_runs_torch_operators_finishes_in_a_worker(self):
        # A worker forked from a thread that has used torch's OpenMP pool, entering the pool
        # again, would wait forever for threads that stayed in the parent: the builds run with
        # one torch thread. This thread uses the pool first, and the export forks from it.
        big = torch.ones(1 << 22)
        self.assertEqual(big.sum().item(), float(1 << 22))
        build = portable.ENGINE.build

        def reducing(partition, aliases, options):
            assert (big * 2).sum().item() == float(1 << 23)
            return build(partition, aliases, options)

        # A hang ends the test process with every thread's traceback instead of a time-out.
        faulthandler.dump_traceback_later(240, exit=True)
        try:
            with _patched_build(reducing):
                _export(None)
        finally:
            faulthandler.cancel_dump_traceback_later()

    def test_a_builds_error_reaches_the_caller(self):
        def failing(partition, aliases, options):
            first = partition.graph_signature.user_inputs[0]
            (node,) = [n for n in partition.graph.nodes if n.name == first]
            raise ValueError(
                f"portable engine: cannot build {first} {list(node.meta['val'].shape)}"
            )

        for workers in ("1", "2"):
            # The first partition's error (prefill's 4 tokens), whichever failed first.
            with (
                self.subTest(workers=workers),
                _patched_build(failing),
                self.assertRaisesRegex(
                    ValueError, r"^portable engine: cannot build tokens \[1, 4\]$"
                ),
            ):
                _export(workers)

    def test_a_worker_that_dies_is_named(self):
        def dying(partition, aliases, options):
            os._exit(3)

        with (
            _patched_build(dying),
            self.assertRaisesRegex(
                RuntimeError,
                r"the worker process building method 'prefill', partition 0 ended without a "
                r"result .*EXECUTORCH_TRT_BUILD_WORKERS=1",
            ),
        ):
            _export(None)

    def test_a_bad_worker_count_is_refused(self):
        for text in ("0", "-1", "two", ""):
            with (
                self.subTest(value=text),
                self.assertRaisesRegex(
                    ValueError, rf"EXECUTORCH_TRT_BUILD_WORKERS='{text}': expected a whole number"
                ),
            ):
                _export(text)


if __name__ == "__main__":
    absltest.main()
