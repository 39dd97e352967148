"""The two-thread first-execute pattern (the Python runtime's log redirect), in a process of
its own.

``python first_execute_race.py PROGRAM.pte ROUNDS``: per round, loads the program twice
(``runtime.load(pte).load_method("forward")``, one per thread) and runs 12 steps in each of two
threads that start together (a barrier), so their *first* executes run at the same time; the
first round is the first execute of the process (where ExecuTorch 1.5.1 creates its thread pool).
Then checks every thread's outputs against one run alone, bit for bit. Prints ``OK <rounds>``
and exits 0, or exits 1 naming the round and step that differed. The stock Python runtime is
imported first, as in any process that uses ``executorch.exir``: its log redirect is what made
this pattern deadlock.

Run by ``runtime_threads_test`` with a timeout: a deadlock is a timeout there.
"""

import sys
import threading

import executorch.extension.pybindings.portable_lib  # noqa: F401  (the stock log redirect)
import torch

from executorch_trt import runtime

STEPS = 12
TOKENS = [(3 * i + 1) % 16 for i in range(STEPS)]


def run(method, barrier=None):
    if barrier is not None:
        barrier.wait()
    return [
        method.execute([torch.tensor([[t]]), torch.tensor([pos])])[0]
        for pos, t in enumerate(TOKENS)
    ]


def main(path: str, rounds: int) -> int:
    with open(path, "rb") as f:
        pte = f.read()
    results = []
    for _ in range(rounds):
        methods = [runtime.load(pte).load_method("forward") for _ in range(2)]
        barrier = threading.Barrier(2)
        outs = [None, None]

        def worker(i):  # the threads are joined within this iteration
            outs[i] = run(methods[i], barrier)  # noqa: B023

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results.append(outs)
    alone = run(runtime.load(pte).load_method("forward"))
    for r, outs in enumerate(results):
        for i, out in enumerate(outs):
            for step, (got, want) in enumerate(zip(out, alone)):
                if not torch.equal(got, want):
                    print(f"FAIL: round {r} thread {i} step {step} differs from a run alone")
                    return 1
    print(f"OK {rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
