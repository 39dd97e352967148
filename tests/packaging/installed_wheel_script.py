"""A user's script against the installed wheel: wheel_test copies it into a fresh venv's
directory and runs it there with that venv's python (cwd outside the checkout, no PYTHONPATH,
no EXECUTORCH_TRT_* variables, no Bazel runfiles).

It exports a model with a mutable buffer (a cache written in place by ``index_copy_``) with
``executorch_trt.export``, runs four steps through ``executorch_trt.runtime`` and through
ExecuTorch's stock ``executorch.runtime.Runtime``, and compares every output and the final
cache with eager PyTorch. Exit 0 with one JSON line on stdout (where the package and its
libraries were found, whether ``import executorch_trt`` registered the backend, the largest
differences); exit 1 naming the first mismatch.
"""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import torch
from executorch.runtime import Runtime

# The link_into_app example's model (examples/link_into_app/export_cache_model.py, copied
# beside this script by wheel_test); it imports executorch_trt.
from export_cache_model import CACHE_LEN, WIDTH, CacheModel

TOLERANCE = 1e-5


def _steps():
    torch.manual_seed(1)
    return [(torch.randn(1, WIDTH), torch.tensor([pos])) for pos in range(CACHE_LEN)]


def _fail(message: str) -> NoReturn:
    print(f"installed_wheel_script: {message}", file=sys.stderr)
    sys.exit(1)


def _max_diff(got, want) -> float:
    return float((got - want).abs().max())


def _check_steps(name: str, method, want, diffs: dict[str, float]) -> None:
    """Runs the steps through ``method`` (``execute([x, pos])``), failing on an output that
    differs from eager's ``want`` by more than ``TOLERANCE``; ``diffs[name]``: the largest."""
    for step, (x, pos) in enumerate(_steps()):
        got = method.execute([x, pos])[0]
        diff = _max_diff(got, want[step])
        if diff > TOLERANCE:
            _fail(f"{name} step {step}: output differs from eager by {diff}")
        diffs[name] = max(diffs[name], diff)


def main() -> None:
    import executorch_trt

    stock = Runtime.get()
    registered_on_import = "TensorRTBackend" in stock.backend_registry.registered_backend_names

    from executorch_trt import runtime

    eager = CacheModel()
    want = []
    with torch.no_grad():
        for x, pos in _steps():
            want.append(eager(x, pos).clone())
        example = _steps()[0]
        program = executorch_trt.export(torch.export.export(CacheModel(), example))

    report = executorch_trt.inspect(program.buffer).method("forward")
    if report.delegate_calls.get("TensorRTBackend", 0) < 1 or report.operators:
        _fail(
            f"forward is not one TensorRTBackend delegate: {report.delegate_summary}, "
            f"operators outside it: {report.operators}"
        )

    # executorch_trt.runtime: the package's own binding and the delegate library, found inside
    # the installed package.
    loaded = runtime.load(program.buffer)
    forward = loaded.load_method("forward")
    diffs = {"executorch_trt.runtime": 0.0, "executorch.runtime": 0.0}
    _check_steps("executorch_trt.runtime", forward, want, diffs)
    cache_diff = _max_diff(loaded.buffer("cache"), eager.cache)
    if cache_diff > TOLERANCE:
        _fail(f"executorch_trt.runtime: the cache differs from eager's by {cache_diff}")
    copied = runtime.bytes_copied()
    if copied != 0:
        _fail(f"executorch_trt.runtime: the delegate copied {copied} bytes of state")

    # The stock runtime: the backend is registered by import when the package does that,
    # else by the documented call.
    if not registered_on_import:
        runtime.load_library()
    method = stock.load_program(program.buffer).load_method("forward")
    _check_steps("executorch.runtime", method, want, diffs)

    print(
        json.dumps(
            {
                "package": executorch_trt.__file__,
                "library": runtime.library_path(),
                "binding": runtime.binding_path(),
                "registered_on_import": registered_on_import,
                "max_diff": diffs,
                "delegates": report.delegate_summary,
            }
        )
    )


if __name__ == "__main__":
    main()
