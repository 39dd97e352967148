"""``InplaceMemoryPlanningPass``: makes a delegate's aliased output *the same value* as the
buffer it updates (DESIGN.md "The in-place trick (verified)").

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
The alias decision is read from the blob (``blob.read_blob``), never re-derived. A write-back
whose output is not an alias of that buffer (copy-back mode, ordinary ops, another backend) is
left alone: in-place is an optimisation, ExecuTorch's write-back stays the correctness path.
"""

from __future__ import annotations

import operator
from typing import Dict, Optional

import torch
import torch.utils._pytree as pytree
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.pass_base import PassResult
from torch.export.exported_program import ExportGraphSignature

from executorch_trt.blob import read_blob
from executorch_trt.compile_options import BACKEND_ID


def _aliases_of(graph_module: torch.fx.GraphModule, call: torch.fx.Node) -> Dict[int, int]:
    """Output index -> input index (delegate argument positions) for a TensorRTBackend call."""
    lowered_node = call.args[0]
    lowered = getattr(graph_module, lowered_node.target, None)
    if getattr(lowered, "backend_id", None) != BACKEND_ID:
        return {}
    return read_blob(lowered.processed_bytes).metadata.aliased_output_to_input()


def _aliased_write_back(
    graph_module: torch.fx.GraphModule, copy: torch.fx.Node
) -> Optional[torch.fx.Node]:
    """Returns the getitem of ``copy_(buffer, getitem)`` if the getitem is a TensorRTBackend
    output that the blob aliases to the argument that *is* ``buffer``; else ``None``."""
    if copy.op != "call_function" or copy.target != torch.ops.aten.copy_.default:
        return None
    buffer, src = copy.args[0], copy.args[1]
    if buffer.op != "placeholder" or src.op != "call_function":
        return None
    if src.target is not operator.getitem:
        return None
    call, j = src.args
    if call.op != "call_function" or call.target is not executorch_call_delegate:
        return None
    i = _aliases_of(graph_module, call).get(j)
    if i is None or call.args[1 + i] is not buffer:
        return None
    return src


def _replace_output_specs(old: torch.fx.Node, spec) -> None:
    """In every output node that returns ``old``, sets the spec at ``old``'s positions to
    ``spec``. The output node's meta["spec"] is a flat sequence parallel to its flat args."""
    for user in old.users:
        if user.op != "output" or "spec" not in user.meta:
            continue
        flat_args = pytree.tree_leaves(user.args[0])
        specs = user.meta["spec"]
        flat_specs = list(specs) if isinstance(specs, (list, tuple)) else [specs]
        if len(flat_specs) != len(flat_args):
            continue  # not the layout SpecPropPass writes; leave it to the planner
        for k, arg in enumerate(flat_args):
            if arg is old:
                flat_specs[k] = spec
        user.meta["spec"] = (type(specs)(flat_specs) if isinstance(specs, (list, tuple))
                             else flat_specs[0])


def share_aliased_buffer_specs(
    graph_module: torch.fx.GraphModule, graph_signature: Optional[ExportGraphSignature] = None
) -> int:
    """Applies the rewrite in the module docstring; returns how many write-backs it removed."""
    removed = 0
    for node in list(graph_module.graph.nodes):
        item = _aliased_write_back(graph_module, node)
        if item is None:
            continue
        buffer_spec = node.args[0].meta["spec"]
        call, j = item.args
        item.meta["spec"] = buffer_spec
        specs = list(call.meta["spec"])
        specs[j] = buffer_spec
        call.meta["spec"] = tuple(specs) if isinstance(call.meta["spec"], tuple) else specs
        # The (dropped-at-emission) BUFFER_MUTATION output now names the aliased getitem.
        # The output node keeps its own spec list (SpecPropPass); its entry for the removed
        # copy_ must become the buffer's spec too, else the planner (which collects specs
        # from the output node as well) reserves an arena slot that no emitted tensor uses.
        _replace_output_specs(node, buffer_spec)
        node.replace_all_uses_with(item)
        if graph_signature is not None:
            for spec in graph_signature.output_specs:
                if spec.arg.name == node.name:
                    spec.arg.name = item.name
        graph_module.graph.erase_node(node)
        removed += 1
    if removed:
        graph_module.graph.lint()
        graph_module.recompile()
    return removed


class InplaceMemoryPlanningPass(MemoryPlanningPass):
    """``MemoryPlanningPass`` that first applies ``share_aliased_buffer_specs``.

    Accepts every ``MemoryPlanningPass`` argument (e.g. ``share_mutable_buffers=True``).
    Must be the memory planning pass of the *top-level* program's ``ExecutorchBackendConfig``.
    """

    def run(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: Optional[ExportGraphSignature] = None,
    ) -> PassResult:
        self.removed_write_backs = share_aliased_buffer_specs(graph_module, graph_signature)
        return super().run(graph_module, graph_signature)
