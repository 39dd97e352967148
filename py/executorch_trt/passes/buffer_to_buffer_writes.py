"""A buffer assigned another buffer as it is (``state.copy_(init)``, a shift register's
``a.copy_(b)``): ExecuTorch 1.5.1 silently drops that write.

Functionalisation makes the ``BUFFER_MUTATION`` output of ``state`` *the ``init`` placeholder
itself*, and ``insert_write_back_for_buffers_pass`` takes any buffer placeholder as "already
updated in place" (``_inplace_lineage``), so ``state`` is never written: eager gives
``[5, 1, 1]``, plain ExecuTorch ``[5, 5, 5]`` (verified).

* ``BufferToBufferWritesPass`` (one of ``executorch_trt.transform_passes()``, which run on each
  edge program before partitioning) rewrites::

      output(..., b_init, ...)              # BUFFER_MUTATION of "state"
    ->
      snapshot = _clone_dim_order(b_init)   # first node: reads the *old* b_init
      output(..., snapshot, ...)

  so ExecuTorch writes ``snapshot`` back into ``state`` after everything else ran, with the
  same write-back as any other new value (reported as a copy, like any other). The snapshot
  stays outside the delegate (``operator_support.STAYS_ON_HOST``).
* ``check_no_dropped_writes`` (run by ``InplaceMemoryPlanningPass``, so the composable path is
  covered too) raises ``ValueError`` naming the buffers if such an output is still there.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.utils._pytree as pytree
from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, OutputKind

from executorch_trt.graph.edit import EDGE, insert_before
from executorch_trt.graph.operator_support import STAYS_ON_HOST

#: ``node.meta`` key of a snapshot node: the FQN of the buffer it copies (for messages).
SNAPSHOT_OF = "executorch_trt_snapshot_of"


def _dropped_writes(
    graph_module: torch.fx.GraphModule, signature: ExportGraphSignature
) -> list[tuple[int, str, torch.fx.Node]]:
    """(output position, target FQN, source placeholder) of every buffer mutation whose new
    value is another placeholder."""
    output = graph_module.graph.output_node()
    flat = pytree.tree_leaves(output.args[0])
    own = {fqn: name for name, fqn in signature.inputs_to_buffers.items()}
    found = []
    for k, spec in enumerate(signature.output_specs):
        if spec.kind != OutputKind.BUFFER_MUTATION or k >= len(flat):
            continue
        value, fqn = flat[k], cast(str, spec.target)  # a buffer mutation names its buffer
        if (
            isinstance(value, torch.fx.Node)
            and value.op == "placeholder"
            and value.name != own.get(fqn)
        ):
            found.append((k, fqn, value))
    return found


def materialise_buffer_to_buffer_writes(ep: ExportedProgram) -> int:
    """Applies the rewrite in the module docstring to edge program ``ep`` in place; returns
    how many writes it materialised."""
    gm = ep.graph_module
    dropped = _dropped_writes(gm, ep.graph_signature)
    if not dropped:
        return 0
    output = gm.graph.output_node()
    flat = list(pytree.tree_leaves(output.args[0]))
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    for k, _, source in dropped:
        rank = source.meta["val"].dim()
        snapshot = insert_before(
            first,
            EDGE.dim_order_ops._clone_dim_order.default,
            (source,),
            {"dim_order": list(range(rank))},
        )
        snapshot.meta[SNAPSHOT_OF] = ep.graph_signature.inputs_to_buffers.get(
            source.name, source.name
        )
        snapshot.meta[STAYS_ON_HOST] = True
        flat[k] = snapshot
        ep.graph_signature.output_specs[k].arg.name = snapshot.name
    output.args = (
        type(output.args[0])(flat) if isinstance(output.args[0], (list, tuple)) else flat[0],
    )
    gm.graph.lint()
    gm.recompile()
    return len(dropped)


class BufferToBufferWritesPass(ExportedProgramPassBase):
    """``materialise_buffer_to_buffer_writes`` as a ``transform_passes`` entry of
    ``to_edge_transform_and_lower`` (it edits the graph signature, so it takes the program)."""

    def call(self, exported_program: ExportedProgram) -> ExportedProgramPassResult:
        changed = materialise_buffer_to_buffer_writes(exported_program) > 0
        return ExportedProgramPassResult(exported_program, changed)


def check_no_dropped_writes(signature: ExportGraphSignature | None, method: str) -> None:
    """Raises ``ValueError`` if a buffer of ``method`` is assigned another buffer as it is
    (the write ExecuTorch drops); ``signature`` is the program's graph signature after
    ``insert_write_back_for_buffers_pass``. That pass also renames the mutation outputs out of
    step when it skips one, so the message lists every buffer involved rather than pairs."""
    if signature is None:
        return
    own = {fqn: name for name, fqn in signature.inputs_to_buffers.items()}
    involved: set[str] = set()
    for spec in signature.output_specs:
        name, fqn = spec.arg.name, cast(str, spec.target)
        if (
            spec.kind == OutputKind.BUFFER_MUTATION
            and name in signature.inputs_to_buffers
            and name != own.get(fqn)
        ):
            involved.update({fqn, signature.inputs_to_buffers[name]})
    if involved:
        raise ValueError(
            f"executorch_trt: {method}: a buffer is assigned another buffer as it is (e.g. "
            f"state.copy_(init), or a shift register a.copy_(b)); buffers involved: "
            f"{', '.join(repr(n) for n in sorted(involved))}. ExecuTorch 1.5.1 drops that "
            "write, so the buffer would never change. Lower with "
            "to_edge_transform_and_lower(..., transform_passes=executorch_trt.transform_passes()) "
            "(executorch_trt.export does), which keeps the write, or assign a computed value "
            "(state.copy_(init.clone()))."
        )
