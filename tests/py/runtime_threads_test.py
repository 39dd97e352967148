"""Threads and logging in ``executorch_trt.runtime``.

* Two programs, one per thread, whose first executes start together: never deadlocks (it did
  about one run in ten on the stock Python runtime), checked in fresh processes
  (``first_execute_race.py``) with a timeout, many rounds each.
* One program shared by two threads: calls are serialized by the program's lock; a
  ``bind_state`` from another thread waits for the running execute; two threads each running
  their own session with ``execute(inputs, state=...)`` (bind and run in one hold of the lock)
  get what each session gives alone.
* ExecuTorch's log lines never go through Python (``sys.stderr``), and a program whose nested
  delegate program holds an operator name with invalid UTF-8 fails to load with a
  ``RuntimeError`` (the stock runtime's log redirect aborted the process).
"""

import io
import subprocess
import sys
import threading

import torch
from absl.testing import absltest

import caller_state_models as csm
import delegate_library
from executorch_trt import runtime
from executorch_trt.format import blob
from executorch_trt.format.wire import BLOB_CHECKSUM_OFFSET, BLOB_MAGIC

PROCESSES = 2
ROUNDS = 25
TIMEOUT_S = 240


@delegate_library.needs_library
class FirstExecuteRaceTest(absltest.TestCase):
    def test_two_threads_first_execute_never_deadlocks(self):
        path = csm.write_tiny_attention_pte(self.create_tempdir().full_path)
        procs = [
            delegate_library.start_worker("first_execute_race.py", path, str(ROUNDS))
            for _ in range(PROCESSES)
        ]
        for i, proc in enumerate(procs):
            try:
                out, err = proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                self.fail(
                    f"process {i}: no result after {TIMEOUT_S} s: the two threads' first "
                    "executes deadlocked"
                )
            self.assertEqual(proc.returncode, 0, f"process {i}:\n{out}\n{err[-4000:]}")
            self.assertIn(f"OK {ROUNDS}", out)


@delegate_library.needs_library
class SharedProgramTest(absltest.TestCase):
    def test_two_threads_on_one_program_are_serialized(self):
        prog = runtime.load(csm.tiny_attention_pte())
        forward = prog.load_method("forward")
        tokens = list(range(csm.CACHE_LEN))
        errors = []

        def worker(positions):
            try:
                for pos in positions:
                    forward.execute(csm.step_inputs(tokens[pos] % csm.VOCAB, pos))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        half = csm.CACHE_LEN // 2
        threads = [
            threading.Thread(target=worker, args=(range(half),)),
            threading.Thread(target=worker, args=(range(half, csm.CACHE_LEN),)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # Every position was written once, whatever the interleaving: the caches equal eager's
        # after the same writes.
        eager = csm.TinyAttention()
        csm.eager_steps(eager, [t % csm.VOCAB for t in tokens])
        for name in ("k_cache", "v_cache"):
            torch.testing.assert_close(prog.buffer(name), getattr(eager, name), msg=name)

    def test_bind_state_while_another_thread_executes(self):
        prog = runtime.load(csm.tiny_attention_pte())
        forward = prog.load_method("forward")
        states = [prog.new_state() for _ in range(2)]
        stop = threading.Event()
        outputs = []

        def run():
            pos = 0
            while not stop.is_set():
                outputs.append(forward.execute(csm.step_inputs(1, pos % csm.CACHE_LEN))[0])
                pos += 1

        runner = threading.Thread(target=run)
        runner.start()
        try:
            for i in range(200):
                prog.bind_state(states[i % 2])
        finally:
            stop.set()
            runner.join()
        self.assertGreater(len(outputs), 0)
        self.assertTrue(all(torch.isfinite(o).all() for o in outputs))

    def test_two_sessions_on_one_program_bind_and_run_atomically(self):
        # Each thread runs its own conversation on the shared program with
        # execute(inputs, state=...): bind and run under one hold of the lock, so another
        # thread's bind never comes between them. Both equal the conversation run alone.
        tokens = {"a": [3, 7, 1, 12, 5, 9, 2, 6], "b": [4, 4, 15, 0, 2, 11, 8, 1]}
        want = {}
        for key, toks in tokens.items():
            alone = runtime.load(csm.tiny_attention_pte())
            forward = alone.load_method("forward")
            want[key] = [forward.execute(csm.step_inputs(t, pos))[0] for pos, t in enumerate(toks)]
        prog = runtime.load(csm.tiny_attention_pte())
        forward = prog.load_method("forward")
        rounds = 30
        barrier = threading.Barrier(2)
        errors = []

        def session(key):
            try:
                for r in range(rounds):
                    state = prog.new_state()
                    for pos, t in enumerate(tokens[key]):
                        barrier.wait()  # both threads' steps start together
                        (got,) = forward.execute(csm.step_inputs(t, pos), state=state)
                        if not torch.equal(got, want[key][pos]):
                            errors.append(f"session {key} round {r} step {pos}")
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(f"session {key}: {type(e).__name__}: {e}")
                barrier.abort()

        threads = [threading.Thread(target=session, args=(key,)) for key in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


@delegate_library.needs_library
class LoggingTest(absltest.TestCase):
    def test_log_lines_never_go_through_python(self):
        pte = csm.tiny_attention_pte()
        runtime.load(pte)  # the library and binding are loaded before stderr is swapped
        captured = io.StringIO()
        old, sys.stderr = sys.stderr, captured
        try:
            prog = runtime.load(pte)  # the delegate logs its binding plan at init
            prog.load_method("forward").execute(csm.step_inputs(1, 0))
        finally:
            sys.stderr = old
        self.assertNotIn("executorch", captured.getvalue())

    def test_invalid_utf8_operator_name_is_a_load_error(self):
        pte = bytearray(csm.tiny_attention_pte())
        start = pte.find(BLOB_MAGIC)
        self.assertGreaterEqual(start, 0, "no delegate blob in the program")
        header = blob.read_header(bytes(pte[start:]), verify_checksum=False)
        payload = slice(
            start + header.payload_offset, start + header.payload_offset + header.payload_size
        )
        name = bytes(pte[payload]).find(b"aten::")
        self.assertGreaterEqual(name, 0, "no operator name in the nested program")
        pte[payload.start + name + len(b"aten::")] = 0xFF  # e.g. "aten::\xffm"
        end = start + header.payload_offset + header.payload_size
        digest = blob.checksum(bytes(pte[start + header.metadata_offset : end]))
        checksum_at = start + BLOB_CHECKSUM_OFFSET
        pte[checksum_at : checksum_at + 8] = digest.to_bytes(8, "little")
        with self.assertRaisesRegex(RuntimeError, "cannot load method 'forward'"):
            runtime.load(bytes(pte))
        # The process goes on: a good program still runs.
        runtime.load(csm.tiny_attention_pte()).load_method("forward").execute(csm.step_inputs(1, 0))


if __name__ == "__main__":
    absltest.main()
