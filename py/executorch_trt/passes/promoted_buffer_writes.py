"""A buffer updated in place with a Python scalar (``count.add_(1)`` on an int32 0-d buffer,
``acc.add_(0.1)`` on a bfloat16 one): ExecuTorch's edge lowering computes its new value in a
wider dtype.

Eager keeps an in-place result in the buffer's dtype. ``to_edge`` turns the scalar into a 0-d
int64 or float32 tensor, and with a 0-d buffer the two 0-d operands promote to that dtype, so
the ``BUFFER_MUTATION`` value is int64 (float32) where the buffer is int32 (bfloat16). Plain
ExecuTorch converts it in its write-back ``copy_``; what the method reads after the update is
the unconverted value (an int64 that does not wrap, a float32 not rounded to bfloat16).

``PromotedBufferWritesPass`` (one of ``executorch_trt.transform_passes()``) rewrites each such
update (``graph.mutations.promoted_buffer_updates``: the value has the buffer's shape, a wider
dtype of the same kind, and reads the buffer converted to that dtype)::

    value                                                  # int64, the buffer int32
  ->
    written = _to_dim_order_copy(value, dtype=int32)       # the buffer's new value
    read = _to_dim_order_copy(written, dtype=int64)        # what the method's other users read

so the buffer holds what eager's holds, the method reads what eager reads (wrapped, rounded),
and every other node keeps the dtype ``to_edge`` gave it. Any other dtype or shape difference
is left to the partitioner, which refuses it (``graph.mutations.mismatched_buffer_mutations``),
as it refuses these when the pass did not run.
"""

from __future__ import annotations

from typing import cast

import torch.utils._pytree as pytree
from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from executorch_trt.graph.edit import cast_to, sync_output_specs
from executorch_trt.graph.mutations import promoted_buffer_updates


def convert_promoted_buffer_writes(ep: ExportedProgram) -> int:
    """Applies the rewrite in the module docstring to edge program ``ep`` in place, to each
    update ``graph.mutations.promoted_buffer_updates`` finds; returns how many it converted."""
    promoted = promoted_buffer_updates(ep)
    if not promoted:
        return 0
    gm = ep.graph_module
    output = gm.graph.output_node()
    flat = list(pytree.tree_leaves(output.args[0]))
    for k, spec in enumerate(ep.graph_signature.output_specs):
        if spec.kind != OutputKind.BUFFER_MUTATION or cast(str, spec.target) not in promoted:
            continue
        value, dtype = promoted[cast(str, spec.target)]
        written = cast_to(value.next, value, dtype)
        read = cast_to(written.next, written, value.meta["val"].dtype)
        for user in list(value.users):
            if user is not written:
                user.replace_input_with(value, read)
        flat = [written if j == k else (read if a is value else a) for j, a in enumerate(flat)]
    output.args = (
        type(output.args[0])(flat) if isinstance(output.args[0], (list, tuple)) else flat[0],
    )
    sync_output_specs(ep)
    gm.graph.lint()
    gm.recompile()
    return len(promoted)


class PromotedBufferWritesPass(ExportedProgramPassBase):
    """``convert_promoted_buffer_writes`` as a ``transform_passes`` entry of
    ``to_edge_transform_and_lower`` (it edits the graph signature, so it takes the program)."""

    def call(self, exported_program: ExportedProgram) -> ExportedProgramPassResult:
        changed = convert_promoted_buffer_writes(exported_program) > 0
        return ExportedProgramPassResult(exported_program, changed)
