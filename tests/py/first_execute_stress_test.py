"""Many fresh processes, each running its first ``execute`` from two threads at once.

ExecuTorch 1.5.1 creates its thread pool on the first execute of a process; with the stock
Python runtime's log redirect, two threads doing that at once deadlocked about one run in ten.
Only a process's *first* execute exercises that, so this test starts
``PROCESSES`` fresh interpreters (``first_execute_worker.py``, ``PARALLEL`` at a time), each of
which loads a small program (``caller_state_models.TinyAttention``: two caches, written in
place by the delegate) through ``executorch_trt.runtime`` and runs its first execute from two
threads released together, then checks both threads' outputs against eager PyTorch. Every
process must print ``OK`` and exit 0 within ``TIMEOUT_S`` seconds; one that hangs dumps its
threads' Python stacks and is reported as a hang, naming the process.

``FIRST_EXECUTE_PROCESSES=N`` runs N processes instead (e.g. 200 by hand).
"""

import os
import subprocess
import time

import torch
from absl.testing import absltest

import caller_state_models as csm
import delegate_library

PROCESSES = int(os.environ.get("FIRST_EXECUTE_PROCESSES", "10"))
PARALLEL = 2
TIMEOUT_S = 60
STEPS = 6


@delegate_library.needs_library
class FirstExecuteStressTest(absltest.TestCase):
    def test_first_execute_from_two_threads_in_fresh_processes(self):
        tmp = self.create_tempdir().full_path
        pte_path = csm.write_tiny_attention_pte(tmp)
        tokens = [(3 * i + 1) % csm.VOCAB for i in range(STEPS)]
        # TinyAttention() seeds its own weights: the program's and the eager model's are equal.
        eager = csm.eager_steps(csm.TinyAttention(), tokens)
        reference = os.path.join(tmp, "reference.pt")
        torch.save({"tokens": tokens, "outputs": eager}, reference)

        start = time.monotonic()
        pending = list(range(PROCESSES))
        running = []
        failures = []
        while pending or running:
            while pending and len(running) < PARALLEL:
                i = pending.pop(0)
                proc = delegate_library.start_worker(
                    "first_execute_worker.py", pte_path, reference, str(TIMEOUT_S)
                )
                running.append((i, proc, time.monotonic()))
            i, proc, started = running.pop(0)
            try:
                # faulthandler ends a hung worker after TIMEOUT_S; the margin covers its exit.
                out, err = proc.communicate(timeout=TIMEOUT_S + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                failures.append(
                    f"process {i}: no result after {TIMEOUT_S + 30} s (killed): hung\n{err[-3000:]}"
                )
                continue
            if proc.returncode != 0 or out.strip() != "OK":
                hung = "Timeout" in err and "Thread" in err
                failures.append(
                    f"process {i}: "
                    + (
                        f"hung in its first execute (no result after {TIMEOUT_S} s; stacks below)"
                        if hung
                        else f"exit {proc.returncode}"
                    )
                    + f" after {time.monotonic() - started:.1f} s\n{out}\n{err[-3000:]}"
                )
        elapsed = time.monotonic() - start
        print(
            f"first_execute_stress: {PROCESSES} processes, {PARALLEL} at a time, "
            f"{elapsed:.1f} s, {len(failures)} failed"
        )
        self.assertEqual(failures, [], "\n\n".join(failures))


if __name__ == "__main__":
    absltest.main()
