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
from collections.abc import Sequence
from typing import Any, cast

import torch
from executorch.exir.delegate import executorch_call_delegate
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature

from executorch_trt.backend.analysis import analyse_partition
from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.graph.nodes import arg_int, arg_node, attr_name, layout_text, value_layout
from executorch_trt.graph.operator_support import op_name
from executorch_trt.options import KV_CACHE_INPLACE, CompileOptions
from executorch_trt.passes.buffer_to_buffer_writes import SNAPSHOT_OF
from executorch_trt.passes.kv_cache_writes import SUPPORTED_FORMS

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
        return (
            f"{self.method}: buffer {self.buffer!r} is not updated in place; ExecuTorch "
            f"copies it back on every call ({self.nbytes} bytes): {self.reason}"
        )


def _nbytes(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size()
    return 0


def _layout_text(node: torch.fx.Node) -> str:
    layout = value_layout(node)
    if layout is None:
        return "of a symbolic shape"
    return layout_text(*layout)


def _delegate_output_reason(
    graph_module: torch.fx.GraphModule, call: torch.fx.Node, index: int, buffer: torch.fx.Node
) -> tuple[str, bool]:
    """(reason, requested) for delegate ``call``'s output ``index`` (the new value of
    ``buffer``) not being in place."""
    lowered: Any = getattr(graph_module, attr_name(arg_node(call, 0)), None)
    backend = getattr(lowered, "backend_id", "?")
    if backend != BACKEND_ID:
        return (
            (
                f"it is updated inside the {backend} delegate, which returns the new value as a "
                "separate output"
            ),
            False,
        )
    options = CompileOptions.from_compile_specs(lowered.compile_specs)
    if options.kv_cache != KV_CACHE_INPLACE:
        return f"kv_cache={options.kv_cache!r} was requested", True
    # Re-derive the blob's decision on a copy of the original partition (same function as
    # preprocess, so the reason is the decision's own).
    original = lowered.original_module
    graph_module = copy.deepcopy(original.graph_module)  # parameters are placeholders: small
    partition = types.SimpleNamespace(
        graph_module=graph_module,
        graph=graph_module.graph,
        graph_signature=copy.deepcopy(original.graph_signature),
    )
    # analyse_partition reads graph_module, graph and graph_signature only.
    contract, decision = analyse_partition(cast(ExportedProgram, partition), options)
    name = contract.outputs[index].name
    if name in decision.not_in_place:
        return decision.not_in_place[name], False
    readers = [
        u
        for u in buffer.users
        if u is not call and u.op != "output" and u.target != torch.ops.aten.copy_.default
    ]
    if buffer not in call.args[1:] and readers:
        reader = readers[0]
        return (
            (
                f"the old value is read outside this delegate call by "
                f"{op_name(reader)} ({reader.name}), so the delegate "
                "cannot write the new value into the buffer"
            ),
            False,
        )
    new = next((u for u in call.users if u.target is operator.getitem and u.args[1] == index), None)
    if new is not None and value_layout(new) != value_layout(buffer):
        return (
            (
                f"its new value is {_layout_text(new)} and the buffer {_layout_text(buffer)}, so "
                "copy_ converts it into the buffer; write a value of the buffer's dtype and "
                "shape (e.g. .to(buffer.dtype), .expand_as(buffer)) to update it in place"
            ),
            False,
        )
    return (
        (
            "the partitioner did not record this delegate output as the buffer's new value "
            "(partition it with executorch_trt.TensorRTPartitioner)"
        ),
        False,
    )


def explain_write_back(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    copy_node: torch.fx.Node,
    method: str,
) -> WriteBack | None:
    """A ``WriteBack`` for the write-back ``copy_(buffer, src)`` ``copy_node`` (as inserted by
    ExecuTorch's ``insert_write_back_for_buffers_pass``), or ``None`` if ``copy_node`` is not
    one."""
    if copy_node.op != "call_function" or copy_node.target != torch.ops.aten.copy_.default:
        return None
    buffer, src = arg_node(copy_node, 0), arg_node(copy_node, 1)
    if buffer.op != "placeholder":
        return None
    fqn = buffer.name
    if graph_signature is not None:
        fqn = graph_signature.inputs_to_buffers.get(buffer.name, buffer.name)
    requested = False
    if (
        src.op == "call_function"
        and src.target is operator.getitem
        and arg_node(src, 0).target is executorch_call_delegate
    ):
        reason, requested = _delegate_output_reason(
            graph_module, arg_node(src, 0), arg_int(src, 1), buffer
        )
    elif src.op == "call_function" and SNAPSHOT_OF in src.meta:
        reason = (
            f"it is assigned the value of {src.meta[SNAPSHOT_OF]!r} as it is (e.g. "
            f"buf.copy_({src.meta[SNAPSHOT_OF]})), which ExecuTorch copies"
        )
    elif src.op == "call_function":
        reason = (
            f"it is written outside the delegate by {op_name(src)}, which TensorRTBackend does not "
            "take, so ExecuTorch computes the new value in a separate tensor"
        )
    else:
        source = src.name
        if graph_signature is not None:
            source = graph_signature.inputs_to_buffers.get(src.name, src.name)
        reason = (
            f"it is assigned the value of {source!r} as it is (e.g. "
            f"buf.copy_({source})), which ExecuTorch copies"
        )
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
            "supported KV-cache write (docs/guide/cache_writes.md) or export "
            "without require_inplace to accept the copy."
        )
    for w in unrequested:
        warnings.warn(
            f"executorch_trt: {w.message()}. In-place forms: {FORMS}; "
            "require_inplace=True makes this an error.",
            NotInPlaceWarning,
            stacklevel=2,
        )


def report_view_copies(
    view_copies: dict[str, int], buffer_of: dict[str, str], require_inplace: bool
) -> None:
    """Warns (``NotInPlaceWarning``) or, with ``require_inplace``, raises
    ``NotInPlaceError`` for in-place updates that write back a *view* of their buffer
    (``backend.aliases.AliasDecision.view_copies``: ``{output: bytes}``; ``buffer_of``: output ->
    partition input). Called by ``preprocess``, which knows the partition's input names (the
    buffer's placeholder, ``b_<fqn with dots as underscores>``) but not the method's."""
    messages = [
        f"buffer input {buffer_of.get(out, out)!r} is updated in place, but each call also "
        f"copies {nbytes} bytes of it inside the delegate: the update writes into a view of the "
        "cache (e.g. cache[layer].index_copy_(...) or cache[..., :k] = v), which is copied out, "
        "updated and written back. Write the full cache directly (cache.index_copy_(dim, idx, v) "
        "or cache[:, :, idx] = v with every leading dimension a full slice) to avoid the copy"
        for out, nbytes in sorted(view_copies.items())
    ]
    if not messages:
        return
    if require_inplace:
        raise NotInPlaceError("executorch_trt: require_inplace=True, but " + "; ".join(messages))
    for message in messages:
        warnings.warn(f"executorch_trt: {message}.", NotInPlaceWarning, stacklevel=2)
