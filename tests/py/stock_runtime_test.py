"""ExecuTorch's own Python runtimes run product programs after ``import executorch_trt``.

Each case is a fresh process (``stock_runtime_worker.py``) that imports ``executorch_trt`` and
nothing else of the product, then loads a program exported by ``executorch_trt.export`` (a
zero-initialised cache written in place and a ones-initialised counter, both mutable buffers)
with ``executorch.runtime.Runtime`` or ``portable_lib._load_for_executorch`` and runs it over
several calls: the outputs equal ``executorch_trt.runtime``'s (bit for bit: the same kernels on
the same engine) and eager PyTorch's. Without the delegate library the import still works and
is silent; ``register()`` and the stock load then fail saying what is wrong. Engine: portable.
"""

import json
import os
import subprocess
import sys

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
from executorch_trt import runtime
from executorch_trt.format.wire import BACKEND_ID

CALLS = 4
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stock_runtime_worker.py")
TIMEOUT_S = 300


class CacheAndCounter(torch.nn.Module):
    """``cache`` [1, 16, 8] float32 starts at zeros, row ``pos`` written each call;
    ``counter`` [1] float32 starts at 1, set to ``pos + 2`` each call. Returns both read back."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(1, 16, 8))
        self.register_buffer("counter", torch.ones(1))

    def forward(self, x, pos):  # x [1, 1, 8] float32, pos [1] int64
        self.cache.index_copy_(1, pos, self.proj(x))
        self.counter.copy_(pos.to(torch.float32) + 2)
        return self.cache.sum(1) * self.counter, self.counter + 0


def _calls():
    gen = torch.Generator().manual_seed(0)
    return [(torch.randn(1, 1, 8, generator=gen), torch.tensor([i * 3])) for i in range(CALLS)]


def _run_worker(kind, pte, inputs, env):
    """``stock_runtime_worker.py KIND PTE INPUTS`` in a fresh process; the completed process."""
    return subprocess.run(
        [sys.executable, WORKER, kind, pte, inputs],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=TIMEOUT_S,
    )


def _child_env(**changes):
    env = delegate_library.subprocess_env()
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@delegate_library.needs_library
class StockRuntimeTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch.manual_seed(0)
        model = CacheAndCounter().eval()
        calls = _calls()
        with torch.no_grad():
            program = executorch_trt.export(torch.export.export(model, calls[0]))
        cls.pte_bytes = program.buffer
        tmp = absltest.get_default_test_tmpdir()
        cls.pte = os.path.join(tmp, "cache_and_counter.pte")
        cls.inputs = os.path.join(tmp, "calls.pt")
        with open(cls.pte, "wb") as f:
            f.write(cls.pte_bytes)
        torch.save(calls, cls.inputs)
        with torch.no_grad():
            cls.eager = [model(*args) for args in calls]
        method = runtime.load(cls.pte_bytes).load_method("forward")
        cls.product = [method.execute(list(args)) for args in calls]

    def _worker(self, kind, env):
        return _run_worker(kind, self.pte, self.inputs, env)

    def _check_stock_run(self, kind):
        proc = self._worker(kind, _child_env())
        self.assertEqual(proc.returncode, 0, f"{kind} worker failed:\n{proc.stderr[-4000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        # What the child's register() says the import loaded: the paths it was given.
        self.assertEqual(
            result["registration"],
            [
                BACKEND_ID,
                os.path.abspath(runtime.library_path()),
                os.path.abspath(runtime.binding_path()),
            ],
        )
        self.assertLen(result["outputs"], CALLS)
        for i, (got, want, eager) in enumerate(zip(result["outputs"], self.product, self.eager)):
            got = [torch.tensor(t, dtype=torch.float32) for t in got]
            self.assertLen(got, 2, f"call {i}")
            for g, w, e in zip(got, want, eager):
                torch.testing.assert_close(
                    g, w, rtol=0, atol=0, msg=f"{kind} call {i} vs executorch_trt.runtime"
                )
                torch.testing.assert_close(g, e, msg=f"{kind} call {i} vs eager")

    def test_program_has_the_delegate(self):
        self.assertIn(BACKEND_ID.encode(), self.pte_bytes)

    def test_executorch_runtime_runs_it(self):
        self._check_stock_run("runtime")

    def test_portable_lib_runs_it(self):
        self._check_stock_run("portable_lib")

    def test_without_the_library_import_is_silent_and_loads_fail_saying_why(self):
        proc = self._worker(
            "missing",
            _child_env(
                **{
                    runtime.LIBRARY_ENV: None,
                    runtime.BINDING_ENV: None,
                    "RUNFILES_DIR": None,
                    "RUNFILES_MANIFEST_FILE": None,
                    "EXECUTORCH_TRT_VERBOSE": None,
                }
            ),
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertRegex(
            result["register_error"],
            r"^LibraryNotFoundError: libexecutorch_trt\.so not found .*" + runtime.LIBRARY_ENV,
        )
        self.assertRegex(result["load_error"], r"^RuntimeError: Failed to load method forward")
        # ExecuTorch's own line names the missing backend; nothing else is printed.
        self.assertEqual(
            proc.stderr.strip().splitlines(),
            [f"[method.cpp:85] Backend {BACKEND_ID} is not registered."],
        )

    def test_a_configured_library_that_is_missing_warns_at_import(self):
        proc = self._worker(
            "missing",
            _child_env(
                **{
                    runtime.LIBRARY_ENV: "/nonexistent/libexecutorch_trt.so",
                    "RUNFILES_DIR": None,
                    "RUNFILES_MANIFEST_FILE": None,
                }
            ),
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        self.assertRegex(
            proc.stderr,
            rf"RuntimeWarning: executorch_trt: {BACKEND_ID} is not "
            rf"registered, .*\${runtime.LIBRARY_ENV}="
            r"'/nonexistent/libexecutorch_trt\.so' does not name a file",
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertRegex(result["register_error"], r"does not name a file")


class Step(torch.nn.Module):
    """``prefill`` ([1, T, 8], T in 1..8) and ``decode`` ([1, 1, 8]) of one model: rows ``pos``
    of the shared ``cache`` [1, 16, 8] written, its row sums returned."""

    def __init__(self, core):
        super().__init__()
        self.core = core

    def forward(self, x, pos):  # x [1, T, 8] float32, pos [T] int64
        self.core.cache.index_copy_(1, pos, self.core.proj(x))
        return (self.core.cache.sum(1) * 1,)


@delegate_library.needs_library
class SharedStateStockRuntimeTest(absltest.TestCase):
    """A prefill/decode program whose methods share a cache: ``executorch.runtime`` (every
    method loaded first) runs it as eager does; ExecuTorch 1.5.1's ``portable_lib`` gives each
    method its own planned memory, so ``decode`` does not see ``prefill``'s cache, as
    docs/guide/stock_executorch.md says (when this test fails, update that page)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        torch.manual_seed(0)
        core = CacheAndCounter().eval()
        T = torch.export.Dim("T", min=1, max=8)
        with torch.no_grad():
            programs = {
                "prefill": torch.export.export(
                    Step(core),
                    (torch.randn(1, 3, 8), torch.arange(3)),
                    dynamic_shapes=({1: T}, {0: T}),
                ),
                "decode": torch.export.export(
                    Step(core), (torch.randn(1, 1, 8), torch.tensor([3]))
                ),
            }
        tmp = absltest.get_default_test_tmpdir()
        cls.pte = os.path.join(tmp, "prefill_decode.pte")
        with open(cls.pte, "wb") as f:
            f.write(executorch_trt.export(programs).buffer)
        gen = torch.Generator().manual_seed(1)
        cls.calls = [("prefill", (torch.randn(1, 3, 8, generator=gen), torch.arange(3)))]
        cls.calls += [
            ("decode", (torch.randn(1, 1, 8, generator=gen), torch.tensor([p]))) for p in (3, 4)
        ]
        cls.inputs = os.path.join(tmp, "method_calls.pt")
        torch.save(cls.calls, cls.inputs)
        eager = Step(core)  # the model's buffers are still its initial ones: export copies them
        with torch.no_grad():
            cls.eager = [eager(*args)[0] for _, args in cls.calls]

    def _outputs(self, kind):
        proc = _run_worker(kind, self.pte, self.inputs, _child_env())
        self.assertEqual(proc.returncode, 0, f"{kind} worker failed:\n{proc.stderr[-4000:]}")
        outputs = json.loads(proc.stdout.strip().splitlines()[-1])["outputs"]
        return [torch.tensor(outs[0], dtype=torch.float32) for outs in outputs]

    def test_executorch_runtime_shares_the_cache(self):
        for (name, _), got, want in zip(self.calls, self._outputs("runtime_methods"), self.eager):
            torch.testing.assert_close(got, want, msg=name)

    def test_portable_lib_does_not_share_the_cache(self):
        got = self._outputs("portable_lib_methods")
        torch.testing.assert_close(got[0], self.eager[0], msg="prefill")
        for step in (1, 2):
            self.assertFalse(torch.allclose(got[step], self.eager[step]), f"decode {step}")


if __name__ == "__main__":
    absltest.main()
