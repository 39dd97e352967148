"""Why a mutable buffer is *not* updated in place, and what export does about it.

``InplaceMemoryPlanningPass`` removes every write-back ``copy_`` whose source the delegate
already wrote into the buffer's storage. Any write-back it leaves costs a full copy of the
buffer per call, so it is never silent: ``explain_write_back`` names the buffer, its size and
the reason (read off the graph, and for a TensorRTBackend output re-derived by the same
``decide_aliases`` that built the blob), and ``report_write_backs`` warns
(``NotInPlaceWarning``) or, with ``require_inplace=True``, raises ``NotInPlaceError``.
Write-backs the user asked for (``kv_cache="copy_back"``) are reported by ``inspect`` but not
warned about.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
import types
import warnings
from typing import Optional, Sequence

import torch
from executorch.exir.delegate import executorch_call_delegate
from torch.export.exported_program import ExportGraphSignature

from executorch_trt.compile_options import BACKEND_ID, CompileOptions
from executorch_trt.operator_support import schema_name
from executorch_trt.passes.kv_cache_update_pass import SUPPORTED_FORMS

FORMS = "; ".join(SUPPORTED_FORMS)


class NotInPlaceWarning(UserWarning):
    """A mutable buffer is copied back by ExecuTorch on every call (not updated in place)."""


class NotInPlaceError(ValueError):
    """``require_inplace=True`` and a mutable buffer would be copied back on every call."""


@dataclasses.dataclass(frozen=True)
class WriteBack:
    """One buffer that ExecuTorch copies back on every call of ``method``.

    ``nbytes`` is the bytes copied per call; ``requested`` is true when the user asked for the
    copy (``kv_cache="copy_back"``)."""

    method: str
    buffer: str
    nbytes: int
    reason: str
    requested: bool = False

    def message(self) -> str:
        return (f"{self.method}: buffer {self.buffer!r} is not updated in place; ExecuTorch "
                f"copies it back on every call ({self.nbytes} bytes): {self.reason}")


def _nbytes(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size()
    return 0


def _delegate_output_reason(graph_module: torch.fx.GraphModule, call: torch.fx.Node,
                            index: int) -> tuple:
    """(reason, requested) for delegate ``call``'s output ``index`` not being in place."""
    lowered = getattr(graph_module, call.args[0].target, None)
    backend = getattr(lowered, "backend_id", "?")
    if backend != BACKEND_ID:
        return (f"it is updated inside the {backend} delegate, which returns the new value as a "
                "separate output", False)
    options = CompileOptions.from_compile_specs(lowered.compile_specs)
    if options.kv_cache != "inplace":
        return f"kv_cache={options.kv_cache!r} was requested", True
    # Re-derive the blob's decision on a copy of the original partition (same function as
    # preprocess, so the reason is the decision's own). Imported here: backend imports engines.
    from executorch_trt.backend import analyse_partition

    original = lowered.original_module
    graph_module = copy.deepcopy(original.graph_module)  # parameters are placeholders: small
    partition = types.SimpleNamespace(graph_module=graph_module, graph=graph_module.graph,
                                      graph_signature=copy.deepcopy(original.graph_signature))
    contract, decision = analyse_partition(partition, options)
    name = contract.outputs[index].name
    if name in decision.not_in_place:
        return decision.not_in_place[name], False
    return ("the partitioner did not record this delegate output as the buffer's new value "
            "(partition it with executorch_trt.TensorRTPartitioner)", False)


def explain_write_back(graph_module: torch.fx.GraphModule,
                       graph_signature: Optional[ExportGraphSignature],
                       copy_node: torch.fx.Node, method: str) -> Optional[WriteBack]:
    """A ``WriteBack`` for the write-back ``copy_(buffer, src)`` ``copy_node`` (as inserted by
    ExecuTorch's ``insert_write_back_for_buffers_pass``), or ``None`` if ``copy_node`` is not
    one."""
    if copy_node.op != "call_function" or copy_node.target != torch.ops.aten.copy_.default:
        return None
    buffer, src = copy_node.args[0], copy_node.args[1]
    if buffer.op != "placeholder":
        return None
    fqn = buffer.name
    if graph_signature is not None:
        fqn = graph_signature.inputs_to_buffers.get(buffer.name, buffer.name)
    requested = False
    if (src.op == "call_function" and src.target is operator.getitem
            and src.args[0].target is executorch_call_delegate):
        reason, requested = _delegate_output_reason(graph_module, src.args[0], src.args[1])
    elif src.op == "call_function":
        op = schema_name(src) or str(src.target)
        reason = (f"it is written outside the delegate by {op}, which TensorRTBackend does not "
                  "take, so ExecuTorch computes the new value in a separate tensor")
    else:
        reason = f"it is assigned from {src.op} {src.name}"
    return WriteBack(method, fqn, _nbytes(buffer), reason, requested)


def report_write_backs(write_backs: Sequence[WriteBack], require_inplace: bool) -> None:
    """Warns once per unrequested write-back (``NotInPlaceWarning``); with
    ``require_inplace`` raises ``NotInPlaceError`` listing all of them instead."""
    unrequested = [w for w in write_backs if not w.requested]
    if not unrequested:
        return
    if require_inplace:
        lines = "\n".join(f"  - {w.message()}" for w in unrequested)
        raise NotInPlaceError(
            f"executorch_trt: require_inplace=True, but {len(unrequested)} mutable buffer "
            f"update(s) would be copied back on every call:\n{lines}\nRewrite the update as a "
            "supported KV-cache write (README: 'Cache writes that update in place') or export "
            "without require_inplace to accept the copy.")
    for w in unrequested:
        warnings.warn(f"executorch_trt: {w.message()}. In-place forms: {FORMS}; "
                      "require_inplace=True makes this an error.", NotInPlaceWarning, stacklevel=2)
