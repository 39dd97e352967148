"""Partitions build side by side in worker processes (``backend.partition_builds``).

A three-method decoder (prefill, decode, read_state: three partitions) exported with worker
processes is byte for byte the program built in the calling process; the builds did run in
other processes; a build's error reaches the caller with its type and message, a worker that
dies is named, an error pickle cannot pass back keeps its type and message, a failed build or
an interrupt stops the builds still running, and a bad
``EXECUTORCH_TRT_BUILD_WORKERS`` is refused.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
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


def _first_input_shape(partition) -> list[int]:
    first = partition.graph_signature.user_inputs[0]
    (node,) = [n for n in partition.graph.nodes if n.name == first]
    return list(node.meta["val"].shape)


def _recording_pid_then_waiting(pids_file: str):
    """A build that writes its process id to ``pids_file`` and then waits an hour."""

    def build(partition, aliases, options):
        with open(pids_file, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(3600)

    return build


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class _CodedError(Exception):
    """An exception pickle cannot rebuild (its __init__ takes a code before the message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


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
        self.assertLen(set(pids), 3)  # a process of its own for each partition
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
            raise ValueError(
                f"portable engine: cannot build {first} {_first_input_shape(partition)}"
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

    def _pids(self, pids_file: str) -> list[int]:
        with open(pids_file) as f:
            return [int(line) for line in f.read().split()]

    def test_a_failed_build_stops_the_builds_still_running(self):
        pids_file = self.create_tempfile().full_path
        waiting = _recording_pid_then_waiting(pids_file)

        def prefill_fails(partition, aliases, options):
            if _first_input_shape(partition) == [1, 4]:  # prefill's tokens
                while not self._pids(pids_file):  # once decode's build is under way
                    time.sleep(0.05)
                raise ValueError("portable engine: cannot build prefill")
            return waiting(partition, aliases, options)

        # Without the stop, the export would wait for the other builds (an hour); the workers
        # inherit a SIGTERM handler that ignores it, so they must be stopped otherwise.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        faulthandler.dump_traceback_later(240, exit=True)
        try:
            with (
                _patched_build(prefill_fails),
                self.assertRaisesRegex(ValueError, "^portable engine: cannot build prefill$"),
            ):
                _export(None)
        finally:
            faulthandler.cancel_dump_traceback_later()
            signal.signal(signal.SIGTERM, previous)
        pids = self._pids(pids_file)
        self.assertNotEmpty(pids)
        self.assertEqual([pid for pid in pids if _alive(pid)], [])

    def test_errors_too_large_for_a_pipe_reach_the_caller(self):
        # Every build fails with a 48 MiB message: workers are stopped while they send theirs.
        def failing(partition, aliases, options):
            raise ValueError("x" * (48 << 20))

        faulthandler.dump_traceback_later(240, exit=True)
        try:
            with _patched_build(failing), self.assertRaises(ValueError) as raised:
                _export(None)
        finally:
            faulthandler.cancel_dump_traceback_later()
        self.assertEqual(len(str(raised.exception)), 48 << 20)
        self.assertIn(
            "raised in the worker process building method 'prefill', partition 0",
            raised.exception.__notes__[0],
        )

    def test_an_interrupt_stops_the_builds(self):
        pids_file = self.create_tempfile().full_path

        def interrupt_when_both_workers_build():
            while len(self._pids(pids_file)) < 2:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered to this (main) thread

        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        faulthandler.dump_traceback_later(240, exit=True)
        try:
            threading.Thread(target=interrupt_when_both_workers_build, daemon=True).start()
            with (
                _patched_build(_recording_pid_then_waiting(pids_file)),
                self.assertRaises(KeyboardInterrupt),
            ):
                _export(None)
        finally:
            faulthandler.cancel_dump_traceback_later()
            signal.signal(signal.SIGINT, previous)
        pids = self._pids(pids_file)
        self.assertLen(pids, 2)
        self.assertEqual([pid for pid in pids if _alive(pid)], [])

    def test_an_error_that_cannot_be_pickled_keeps_its_type_and_message(self):
        def failing(partition, aliases, options):
            raise _CodedError(3, "portable engine: cannot build this partition")

        with _patched_build(failing), self.assertRaises(_CodedError):
            _export("1")  # in process: the exception as raised
        with (
            _patched_build(failing),
            self.assertRaisesRegex(
                RuntimeError,
                r"^TensorRTBackend: building method 'prefill', partition 0 raised "
                r"\S*_CodedError: portable engine: cannot build this partition \(passed on as "
                r"RuntimeError.*EXECUTORCH_TRT_BUILD_WORKERS=1",
            ),
        ):
            _export(None)

    def test_a_worker_that_dies_is_named(self):
        def dying(partition, aliases, options):
            os._exit(3)

        build = portable.ENGINE.build

        def decode_dies(partition, aliases, options):
            if _first_input_shape(partition) == [1, 1]:  # decode's token
                os._exit(3)
            return build(partition, aliases, options)

        for failing, where in ((dying, "method 'prefill'"), (decode_dies, "method 'decode'")):
            with (
                self.subTest(where=where),
                _patched_build(failing),
                self.assertRaisesRegex(
                    RuntimeError,
                    rf"the worker process building {where}, partition 0 ended without a "
                    r"result \(exit code 3\).*EXECUTORCH_TRT_BUILD_WORKERS=1",
                ),
            ):
                _export(None)

    def test_an_interrupt_while_a_result_is_read_stops_its_worker(self):
        # Ctrl-C can land while a large result is being read: the worker, still sending, is
        # stopped rather than waited for.
        context = multiprocessing.get_context("fork")
        worker = context.Process(target=time.sleep, args=(3600,), daemon=True)
        worker.start()
        reader = unittest.mock.Mock(recv=unittest.mock.Mock(side_effect=KeyboardInterrupt))
        job = unittest.mock.Mock(where="method 'decode', partition 0")
        faulthandler.dump_traceback_later(120, exit=True)
        try:
            with self.assertRaises(KeyboardInterrupt):
                partition_builds._receive(reader, worker, job)
        finally:
            faulthandler.cancel_dump_traceback_later()
        self.assertFalse(worker.is_alive())
        reader.close.assert_called()

    def test_workers_die_with_the_exporting_process(self):
        pids_file = self.create_tempfile().full_path
        script = textwrap.dedent(f"""
            import sys, unittest.mock
            sys.argv = ["exporting"]
            import partition_builds_test as t
            with t._patched_build(t._recording_pid_then_waiting({pids_file!r})):
                t._export(None)
        """)
        exporting = subprocess.Popen([sys.executable, "-c", script])
        try:
            while len(self._pids(pids_file)) < 2:
                self.assertIsNone(exporting.poll(), "the exporting process ended early")
                time.sleep(0.05)
        finally:
            exporting.kill()  # SIGKILL: nothing in it can stop its workers
            exporting.wait()
        pids = self._pids(pids_file)
        # The kernel kills the workers when their parent dies; they are reaped by init.
        for _ in range(600):
            if not [pid for pid in pids if _alive(pid)]:
                break
            time.sleep(0.05)
        self.assertEqual([pid for pid in pids if _alive(pid)], [])

    def test_a_bad_worker_count_is_refused(self):
        for text in ("0", "-1", "two", "", " 2", "+2", "2_0", "2.0", "\u0662"):
            with (
                self.subTest(value=text),
                self.assertRaisesRegex(
                    ValueError,
                    rf"EXECUTORCH_TRT_BUILD_WORKERS='{re.escape(text)}': expected a whole number",
                ),
            ):
                _export(text)


if __name__ == "__main__":
    absltest.main()
