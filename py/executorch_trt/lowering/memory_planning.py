"""``InplaceMemoryPlanningPass``: makes a delegate's aliased output *the same value* as the buffer
it updates (``docs/executorch_notes.md``, "Mutable buffers and memory planning": the in-place
trick).

Graph shape rewritten (top-level program, just before memory planning)::

    call = executorch_call_delegate(lowered, ..., b_cache, ...)   # TensorRTBackend
    new  = getitem(call, j)        # blob: outputs[j] aliases the input that is b_cache
    copy_(b_cache, new)            # write-back from insert_write_back_for_buffers_pass
  ->
    call = executorch_call_delegate(lowered, ..., b_cache, ...)
    new  = getitem(call, j)        # meta["spec"] is b_cache's TensorSpec (also call's spec[j])
    output(..., new, ...)          # the BUFFER_MUTATION output (the emitter drops it)

The emitter then gives ``new`` and ``b_cache`` one value id: the ``DelegateCall`` passes the
same EValue as input and output, no write-back ``copy_`` runs and no extra tensor is planned.
The alias decision is read from the blob's metadata (``blob.read_metadata``: header and metadata
only), never re-derived. A write-back whose output is not an alias of that buffer (copy-back
mode, ordinary ops, another backend) is left in place, because ExecuTorch's write-back keeps it
correct, but never silently: each one is explained and warned about, or rejected with
``require_inplace=True`` (``executorch_trt.backend.diagnostics``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.pass_base import PassResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.memory_planning_pass import _MemoryPlanningState
from torch.export.graph_signature import ExportGraphSignature

from executorch_trt.backend.diagnostics import WriteBack, explain_write_back, report_write_backs
from executorch_trt.format.blob import read_metadata
from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.graph.edit import remove_write_back
from executorch_trt.graph.nodes import arg_int, arg_node, attr_name, value_layout
from executorch_trt.lowering.buffer_sharing import unshared_reason
from executorch_trt.passes.buffer_to_buffer_writes import check_no_dropped_writes
from executorch_trt.passes.cross_attn_cache import (
    check_cache_writes_exposed,
    plan_cond_caches_in_place,
)


def _aliases_of(graph_module: torch.fx.GraphModule, call: torch.fx.Node) -> dict[int, int]:
    """Output index -> input index (delegate argument positions) for a TensorRTBackend call."""
    lowered: Any = getattr(graph_module, attr_name(arg_node(call, 0)), None)
    if getattr(lowered, "backend_id", None) != BACKEND_ID:
        return {}
    return read_metadata(lowered.processed_bytes).aliased_output_to_input()


def _aliased_write_back(
    graph_module: torch.fx.GraphModule, copy: torch.fx.Node
) -> torch.fx.Node | None:
    """Returns the getitem of ``copy_(buffer, getitem)`` if the getitem is a TensorRTBackend
    output that the delegate writes into ``buffer``'s storage when the two are one value:
    either the blob aliases it to the argument that *is* ``buffer``, or the blob aliases it to
    nothing and nothing but this ``copy_`` uses ``buffer`` (a full overwrite of state nobody
    reads, e.g. ``buf.copy_(x * 2)``: the engine then writes its output straight into the
    buffer, and no reader can see the write early), and the two have one dtype and shape;
    else ``None``."""
    if copy.op != "call_function" or copy.target != torch.ops.aten.copy_.default:
        return None
    buffer, src = arg_node(copy, 0), arg_node(copy, 1)
    if buffer.op != "placeholder" or src.op != "call_function":
        return None
    if src.target is not operator.getitem:
        return None
    call, j = arg_node(src, 0), arg_int(src, 1)
    if call.op != "call_function" or call.target is not executorch_call_delegate:
        return None
    lowered = getattr(graph_module, attr_name(arg_node(call, 0)), None)
    if getattr(lowered, "backend_id", None) != BACKEND_ID:
        return None
    aliases = _aliases_of(graph_module, call)
    if j not in aliases:
        # Not aliased by the blob: bound to the buffer's storage only if it fits it (copy_
        # casts or broadcasts otherwise).
        layout = value_layout(src)
        fits = layout is not None and layout == value_layout(buffer)
        return src if fits and list(buffer.users) == [copy] else None
    return src if call.args[1 + aliases[j]] is buffer else None


def share_aliased_buffer_specs(
    graph_module: torch.fx.GraphModule, graph_signature: ExportGraphSignature | None = None
) -> int:
    """Applies the rewrite in the module docstring; returns how many write-backs it removed."""
    removed = 0
    rewritten = set()
    for node in list(graph_module.graph.nodes):
        item = _aliased_write_back(graph_module, node)
        if item is None or item in rewritten:  # one output cannot be two buffers
            continue
        rewritten.add(item)
        buffer_spec = arg_node(node, 0).meta["spec"]
        call, j = arg_node(item, 0), arg_int(item, 1)
        item.meta["spec"] = buffer_spec
        specs = list(call.meta["spec"])
        specs[j] = buffer_spec
        call.meta["spec"] = tuple(specs) if isinstance(call.meta["spec"], tuple) else specs
        # The (dropped-at-emission) BUFFER_MUTATION output now names the aliased getitem.
        remove_write_back(node, item, graph_signature)
        removed += 1
    if removed:
        graph_module.graph.lint()
        graph_module.recompile()
    return removed


#: ``graph_module.meta`` key of a method planned with shared mutable buffers; its value is
#: ``share_by_name``.
SHARES_BUFFERS = "executorch_trt_shares_mutable_buffers"
#: ``graph_module.meta`` key of a method planned without sharing; its value says which option
#: turned sharing off (``buffer_sharing.unshared_reason``).
UNSHARED_BUFFERS = "executorch_trt_unshared_mutable_buffers"


class InplaceMemoryPlanningPass(MemoryPlanningPass):
    """``MemoryPlanningPass`` that first binds ``torch.cond`` cross-attention cache outputs to
    their buffers (``passes.cross_attn_cache.plan_cond_caches_in_place``), applies
    ``share_aliased_buffer_specs``, and reports
    every write-back it leaves (``backend.diagnostics``).

    Args (beyond every ``MemoryPlanningPass`` argument, e.g. ``share_mutable_buffers=True``):
        inplace: apply the rewrite (``False`` keeps ExecuTorch's write-back for every buffer,
            as the user asked, and reports nothing).
        require_inplace: raise ``NotInPlaceError`` instead of warning when a buffer update
            would be copied back (``kv_cache="copy_back"`` write-backs are requested, not
            reported).
        method_names: names of the methods in the order ``to_executorch`` plans them (the
            order of the programs given to ``to_edge``), for messages; without it methods are
            called ``method #k``.
        share_by_name: with ``share_mutable_buffers``, equal buffers of different module
            instances may be shared (``buffer_sharing.check_buffer_sharing``, which the
            emitter runs on the methods this pass planned: ``SHARES_BUFFERS``).

    Must be the memory planning pass of the *top-level* program's ``ExecutorchBackendConfig``.
    One instance can finalise any number of programs in turn (``backend_config()`` can be
    reused): its cross-method state is reset after each ``run_multimethod``. Raises
    ``ValueError`` when methods planned together share a buffer name with different shapes or
    dtypes (ExecuTorch would place both at one offset sized for one of them).
    """

    def __init__(
        self,
        *args: Any,
        inplace: bool = True,
        require_inplace: bool = False,
        method_names: Sequence[str] | None = None,
        share_by_name: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.share_by_name = share_by_name
        self.inplace = inplace
        self.require_inplace = require_inplace
        self.method_names = list(method_names) if method_names else None
        self._runs = 0
        self.write_backs: list[WriteBack] = []

    def _method_name(self) -> str:
        if self.method_names and self._runs < len(self.method_names):
            return f"method {self.method_names[self._runs]!r}"
        return f"method #{self._runs}"

    def run(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None = None,
    ) -> PassResult:
        check_no_dropped_writes(graph_signature, self._method_name())
        check_cache_writes_exposed(graph_module, graph_signature, self._method_name())
        # Correctness, not only copies: without it a cond's cache output lives in the arena all
        # cond branches share (ExecuTorch #21490), so it is applied in every mode.
        plan_cond_caches_in_place(graph_module, graph_signature)
        if self.inplace:
            share_aliased_buffer_specs(graph_module, graph_signature)
            method = self._method_name()
            for node in graph_module.graph.nodes:
                write_back = explain_write_back(graph_module, graph_signature, node, method)
                if write_back is not None:
                    self.write_backs.append(write_back)
        # Only the emitter holds every method's buffers, to check what is (not) shared.
        if self.share_mutable_buffers:
            graph_module.meta[SHARES_BUFFERS] = self.share_by_name
        else:
            graph_module.meta[UNSHARED_BUFFERS] = unshared_reason(self.alloc_mutable_buffers)
        self._runs += 1
        return super().run(graph_module, graph_signature)

    def run_multimethod(self) -> None:
        try:
            _check_shared_buffer_specs(self.state.mutable_buffers, self.state.maybe_mutable_buffers)
            super().run_multimethod()  # type: ignore[no-untyped-call]  # ExecuTorch's, unannotated
            report_write_backs(self.write_backs, self.require_inplace)
        finally:
            # A new program starts from scratch (ExecuTorch keeps these per instance).
            self.state = _MemoryPlanningState()
            self._runs = 0
            self.write_backs = []


def _check_shared_buffer_specs(
    mutable: dict[str, set[Any]], maybe_mutable: dict[str, set[Any]]
) -> None:
    """Raises ``ValueError`` if the specs ExecuTorch will place at one offset (one FQN across
    methods, ``MemoryPlanningPass.run_multimethod``) differ in shape or dtype."""
    for fqn, specs in mutable.items():
        kinds = {(tuple(s.shape), s.dtype) for s in list(specs) + list(maybe_mutable.get(fqn, ()))}
        if len(kinds) > 1:
            seen = ", ".join(f"{list(shape)} {dtype}" for shape, dtype in sorted(kinds, key=str))
            raise ValueError(
                f"executorch_trt: mutable buffer {fqn!r} appears in several methods with "
                f"different shapes/dtypes ({seen}); methods exported together share buffers "
                "by name, so this would place them in one slot sized for one of them. Rename "
                "the buffer in one module or export the methods as separate programs."
            )
