"""Mutated delegate blobs through the Python loading path.

Exports a small program (``CacheWriter``: a ``Linear(8, 8)`` writing a ``[1, 6, 8]`` cache with
``index_copy_``, the program of the issue), then workers (``load_fuzz_worker.py``, fresh
processes, ``PARALLEL`` at a time, ``BATCH`` inputs each) load and execute ``MUTATIONS``
mutations of it through ``executorch_trt.runtime`` (a few bytes of the blob's metadata or
payload changed, the checksum recomputed). A Python exception (a load or execute error) is
fine; a worker that dies by a signal (a crash or an abort inside the runtime) or hangs fails
the test, naming the mutation index; the input is written to the test's undeclared outputs
(or the temp dir) and the worker restarts after it, so one run reports every such input.
The inputs it found are kept under ``regressions/load_fuzz/`` and must fail to load with a
``RuntimeError``:

* ``xnnpack_weight_dims_past_data.bin`` (seed 7, mutation 1085): the nested XNNPACK delegate's
  weight dims changed from [8, 8] to [8, 3473416]; ExecuTorch's XnnpackBackend handed XNNPACK the
  256-byte weight with those dims and ``xnn_create_fully_connected_nc_f32`` read past it
  (SIGSEGV at load). Fixed by ``core/engine/portable/nested_delegate_checks.h``.

By hand, longer: ``LOAD_FUZZ_MUTATIONS=10000 LOAD_FUZZ_SEED=7 ./bazelw test
//tests/py:load_fuzz_test --test_env=LOAD_FUZZ_MUTATIONS --test_env=LOAD_FUZZ_SEED
--test_timeout=3600``.
"""

import os
import subprocess
import sys
import time

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
import load_fuzz_worker
from executorch_trt import runtime

MUTATIONS = int(os.environ.get("LOAD_FUZZ_MUTATIONS", "1000"))
SEED = int(os.environ.get("LOAD_FUZZ_SEED", "1"))
PARALLEL = 2
BATCH = 300


class CacheWriter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(1, 6, 8))

    def forward(self, x, pos):
        self.cache.index_copy_(1, pos, self.proj(x))
        return self.cache.sum(1)


REGRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions", "load_fuzz")


@delegate_library.needs_library
class LoadFuzzTest(absltest.TestCase):
    def test_regression_inputs_fail_to_load_with_an_error(self):
        names = sorted(os.listdir(REGRESSIONS))
        self.assertIn("xnnpack_weight_dims_past_data.bin", names)
        for name in names:
            with open(os.path.join(REGRESSIONS, name), "rb") as f:
                pte = f.read()
            with self.assertRaisesRegex(RuntimeError, "cannot load method 'forward'", msg=name):
                runtime.load(pte).load_method("forward").execute(load_fuzz_worker.INPUTS)

    def test_mutated_blobs_never_kill_the_process(self):
        tmp = self.create_tempdir().full_path
        out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", tmp)
        with torch.no_grad():
            ep = torch.export.export(CacheWriter().eval(), tuple(load_fuzz_worker.INPUTS))
            base = executorch_trt.export(ep).buffer
        base_path = os.path.join(tmp, "cache_writer.pte")
        with open(base_path, "wb") as f:
            f.write(base)
        # The unmutated program runs (so the mutations start from a program that works).
        runtime.load(base).load_method("forward").execute(load_fuzz_worker.INPUTS)

        env = delegate_library.subprocess_env()
        script = os.path.abspath(load_fuzz_worker.__file__)
        start = time.monotonic()
        batches = [(b, min(BATCH, MUTATIONS - b)) for b in range(0, MUTATIONS, BATCH)]
        running = []
        failures = []
        outcomes = {"ok": 0, "error": 0}

        def launch(first, count):
            # ExecuTorch's log lines may quote corrupt bytes. Open for the worker's lifetime:
            # closed once its outcome is read below.
            log_path = os.path.join(tmp, f"worker_{first}.log")
            log = open(log_path, "w+", errors="replace")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, script, base_path, str(SEED), str(first), str(count)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            running.append((first, count, proc, log))

        while batches or running:
            while batches and len(running) < PARALLEL:
                launch(*batches.pop(0))
            first, count, proc, log = running.pop(0)
            out, _ = proc.communicate()
            log.seek(0)
            tail = log.read()[-3000:]
            log.close()
            done, current = set(), None
            for line in out.splitlines():
                parts = line.split()
                if parts[:1] == ["S"]:
                    current = int(parts[1])
                elif parts[:1] == ["R"]:
                    done.add(int(parts[1]))
                    outcomes[parts[2]] += 1
            if proc.returncode == 0 and len(done) == count:
                continue
            if current is None or current in done:
                failures.append(
                    f"worker [{first}, {first + count}) exited {proc.returncode} "
                    f"outside an input\n{tail}"
                )
                continue
            path = os.path.join(out_dir, f"load_fuzz_seed{SEED}_{current}.pte")
            with open(path, "wb") as f:
                f.write(load_fuzz_worker.mutate(base, SEED, current))
            what = (
                "hung"
                if "Timeout" in tail
                else f"died by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited {proc.returncode}"
            )
            failures.append(
                f"mutation {current} (seed {SEED}): the process {what}; input "
                f"written to {path}\n{tail}"
            )
            rest = first + count - current - 1
            if rest > 0:
                launch(current + 1, rest)
        elapsed = time.monotonic() - start
        print(
            f"load_fuzz: {MUTATIONS} mutations (seed {SEED}) in {elapsed:.1f} s: "
            f"{outcomes['ok']} loaded and executed, {outcomes['error']} rejected with an "
            f"error, {len(failures)} killed the process or hung"
        )
        self.assertEqual(failures, [], "\n\n".join(failures))
        self.assertEqual(outcomes["ok"] + outcomes["error"], MUTATIONS)


if __name__ == "__main__":
    absltest.main()
