"""A fresh process for stock_runtime_test.py: ``import executorch_trt``, then a program run by one
of ExecuTorch's own Python runtimes, never ``executorch_trt.runtime``.

``stock_runtime_worker.py KIND PTE INPUTS``: KIND is ``runtime`` (``executorch.runtime.Runtime``)
or ``portable_lib`` (``_load_for_executorch``); INPUTS a ``torch.save``d list of ``forward``
argument lists, run in order on one loaded method. KIND ``runtime_methods`` /
``portable_lib_methods``: INPUTS a list of ``(method name, argument list)``, every method loaded
before the first runs. Prints one JSON line,
``{"registration": [...], "outputs": [[out0 as a nested list, ...] per call]}``; exits 1 with
the exception on a failure (a load without the backend).

``stock_runtime_worker.py missing PTE INPUTS``: for a process where the delegate library is not
found: prints ``{"register_error": ..., "load_error": ...}``, the exceptions that
``executorch_trt.register()`` and a ``Runtime`` load of the program raise.
"""

import json
import sys

import torch

import executorch_trt  # registers TensorRTBackend, when its library is found


def _runtime_outputs(pte: str, calls):
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    return [method.execute(list(args)) for args in calls]


def _portable_lib_outputs(pte: str, calls):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(pte)
    return [module.forward(list(args)) for args in calls]


def _runtime_method_outputs(pte: str, calls):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    methods = {name: program.load_method(name) for name, _ in calls}
    return [methods[name].execute(list(args)) for name, args in calls]


def _portable_lib_method_outputs(pte: str, calls):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(pte)
    return [module.run_method(name, list(args)) for name, args in calls]


def _missing(pte: str, calls) -> dict:
    from executorch.runtime import Runtime

    result = {}
    try:
        executorch_trt.register()
        result["register_error"] = None
    except Exception as e:  # noqa: BLE001 (reported to the test)
        result["register_error"] = f"{type(e).__name__}: {e}"
    try:
        Runtime.get().load_program(pte).load_method("forward").execute(list(calls[0]))
        result["load_error"] = None
    except Exception as e:  # noqa: BLE001 (reported to the test)
        result["load_error"] = f"{type(e).__name__}: {e}"
    return result


def main(kind: str, pte: str, inputs: str) -> None:
    calls = torch.load(inputs)
    if kind == "missing":
        print(json.dumps(_missing(pte, calls)))
        return
    run = {
        "runtime": _runtime_outputs,
        "portable_lib": _portable_lib_outputs,
        "runtime_methods": _runtime_method_outputs,
        "portable_lib_methods": _portable_lib_method_outputs,
    }[kind]
    outputs = [[t.tolist() for t in outs] for outs in run(pte, calls)]
    registration = executorch_trt.register()  # after the run: only the import registered it
    print(json.dumps({"registration": list(registration), "outputs": outputs}))


if __name__ == "__main__":
    main(*sys.argv[1:])
