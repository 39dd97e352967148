"""One fresh process of ``first_execute_stress_test``: the first ``execute`` of the process from
two threads at once, checked against eager PyTorch.

``python first_execute_worker.py PROGRAM.pte REFERENCE.pt TIMEOUT_S``: imports the stock Python
runtime first (as any process that uses ``executorch.exir`` does: its log redirect is what made
this pattern deadlock), loads the program twice (``runtime.load(pte).load_method("forward")``,
one per thread), then two threads released together by a barrier each run the steps of
``REFERENCE.pt`` (``{"tokens": [...], "outputs": [...]}``, eager outputs) from position 0, so
their first executes (where ExecuTorch 1.5.1 creates its thread pool) run at the same time.
Prints ``OK`` and exits 0 when both threads' outputs equal each other bit for bit and eager's
within float tolerance; exits 1 naming the thread and step otherwise. If it has not finished
after TIMEOUT_S seconds it dumps every thread's Python stack to stderr and exits (faulthandler),
so a hang is reported with where it hung.
"""

import faulthandler
import sys
import threading

import executorch.extension.pybindings.portable_lib  # noqa: F401  (the stock log redirect)
import torch

from executorch_trt import runtime


def main(pte_path: str, reference_path: str, timeout_s: float) -> int:
    faulthandler.dump_traceback_later(timeout_s, exit=True)
    reference = torch.load(reference_path)
    tokens, expected = reference["tokens"], reference["outputs"]
    with open(pte_path, "rb") as f:
        pte = f.read()
    methods = [runtime.load(pte).load_method("forward") for _ in range(2)]
    barrier = threading.Barrier(2)
    outs = [None, None]
    errors = []

    def worker(i):
        try:
            barrier.wait()
            outs[i] = [
                methods[i].execute([torch.tensor([[t]]), torch.tensor([pos])])[0]
                for pos, t in enumerate(tokens)
            ]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    faulthandler.cancel_dump_traceback_later()
    if errors:
        print("FAIL: " + "; ".join(errors))
        return 1
    for step, want in enumerate(expected):
        if not torch.equal(outs[0][step], outs[1][step]):
            print(f"FAIL: step {step}: the two threads' outputs differ")
            return 1
        for i in range(2):
            if not torch.allclose(outs[i][step], want, rtol=1e-5, atol=1e-6):
                print(f"FAIL: thread {i} step {step}: {outs[i][step]} != eager {want}")
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
