"""The kernels the portable engine's runtime has, and the export-time check that a nested
program calls only those.

The list is the runtime's own operator schema table, ``core/engine/portable/operator_schemas.txt``
(every kernel the pinned ExecuTorch wheel registers, plus the delegate's own; generated and
checked for staleness by ``//core/engine/portable:operator_schemas_table_test``). The C++
runtime refuses, at load, a nested program that calls any other operator
(``CheckNestedProgram``). Some operations export but have no kernel anywhere in ExecuTorch
1.5.1, e.g. ``Tensor.view(dtype)`` (``aten::view_copy.dtype_out``; a plain ExecuTorch program
calling it fails to load with "Missing operator"). Checking here turns that load failure into
an export error naming the operator and the model line that calls it.
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path

import torch
from executorch.exir.program._program import ExecutorchProgramManager
from torch.export import ExportedProgram

from executorch_trt.graph.operator_support import schema_name

TABLE = "operator_schemas.txt"


def _table_candidates() -> list[Path]:
    here = Path(__file__).parent
    return [
        here / TABLE,  # the wheel stores it beside this module
        # A checkout on PYTHONPATH, or Bazel runfiles: py/executorch_trt/engines/portable/.
        here.parents[3] / "core" / "engine" / "portable" / TABLE,
    ]


@functools.cache
def runtime_kernels() -> frozenset[str]:
    """Every kernel name the portable engine's runtime can call, as ``"aten::add.out"`` (the
    table's first column). Raises ``FileNotFoundError`` naming where it looked."""
    for path in _table_candidates():
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            return frozenset(line.split(" ", 1)[0] for line in lines if line and line[0] != "#")
    raise FileNotFoundError(
        f"the portable engine's operator table ({TABLE}) is in none of "
        f"{[str(p) for p in _table_candidates()]}; reinstall executorch_trt"
    )


def _kernel_name(name: str, overload: str) -> str:
    return f"{name}.{overload}" if overload else name


def _callers(ep: ExportedProgram, kernel: str) -> list[str]:
    """Where the model calls ``kernel``: each node's name and the last frame of its stack
    trace, control-flow branches included. ``ep``'s nodes are the out variants by then
    (``to_executorch`` replaces them in place)."""
    name, _, overload = kernel.partition(".")
    found = []
    for module in ep.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            target_overload = getattr(node.target, "_overloadname", None)
            if schema_name(node) == name and target_overload == (overload or "default"):
                frame = (node.meta.get("stack_trace") or "").strip().splitlines()[-2:]
                where = " ".join(line.strip() for line in frame)
                found.append(f"{node.name} ({where})" if where else node.name)
    return found


def check_kernels(program: ExecutorchProgramManager, edge: ExportedProgram) -> None:
    """Raises ``ValueError`` when nested program ``program`` (one method, emitted from edge
    program ``edge``) calls an operator the runtime has no kernel for (``runtime_kernels``),
    naming it and the ``edge`` nodes that call it; the program would fail to load."""
    kernels = runtime_kernels()
    missing = sorted(
        {
            _kernel_name(op.name, op.overload)
            for plan in program.executorch_program.execution_plan
            for op in plan.operators
        }
        - kernels
    )
    if not missing:
        return
    version = importlib.metadata.version("executorch")
    calls = "; ".join(
        f"{kernel}, called by {', '.join(_callers(edge, kernel)) or 'the lowered program'}"
        for kernel in missing
    )
    raise ValueError(
        f"portable engine: the delegated graph needs {calls}. ExecuTorch {version}'s runtime has "
        f"no kernel for {'it' if len(missing) == 1 else 'them'} (neither the delegate nor a "
        "stock ExecuTorch runtime could load the program: 'Missing operator'). Rewrite that "
        "part of the model with operations ExecuTorch runs (for Tensor.view(dtype), a "
        "reinterpretation of the bytes, there is none: keep the value in the dtype it is read "
        "as, or convert it with .to(dtype))"
    )
