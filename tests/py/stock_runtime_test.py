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
        proc = subprocess.run(
            [sys.executable, WORKER, kind, self.pte, self.inputs],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
        )
        return proc

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


if __name__ == "__main__":
    absltest.main()
