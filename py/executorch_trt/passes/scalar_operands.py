"""``scalar_operands_as_tensors``: a Python scalar operand of an arithmetic op whose tensor
operands are all 0-d becomes a 0-d tensor of the op's eager result dtype, before
decomposition, so that ExecuTorch's edge lowering computes the op in eager's dtype.

Why: in eager PyTorch a Python scalar is a "wrapped number" that does not widen a tensor's dtype
of the same kind: ``count.add_(1)`` on a 0-d int16 buffer stays int16 (and wraps), and
``acc.add_(0.1)`` on a 0-d float16 one adds 0.1 rounded to float16. ExecuTorch 1.5.1's
``to_edge`` turns the scalar into a plain 0-d int64 (float32) tensor (``ScalarToTensorPass``),
and ``RemoveMixedTypeOperators`` then promotes two 0-d tensors to the wider dtype: the update
and everything computed from it run in int64 (float32), so arithmetic after it does not wrap,
the method returns int64 where eager returns int16, a float16 sum rounds differently, and a
buffer's new value no longer has the buffer's dtype (which the partitioner refuses). A tensor
with a dimension is not affected (a 0-d operand does not widen it).

The pass rewrites, in every graph of an ATen program (control-flow branches included), the
ops ``RemoveMixedTypeOperators`` promotes (``add``, ``sub``, ``mul``, ``div``, their in-place
forms, ``minimum``)::

    add_(count, 1)                       # count: 0-d int16
  ->
    add_(count, scalar_tensor(1, dtype=int16))

where the dtype is ``torch.result_type`` of the tensor operand and the scalar (eager's rule),
so the scalar is converted exactly as eager converts it and no operand is wider than eager's
result. An op whose scalar is of a higher kind than its tensor (``int_count + 0.5``) promotes to
a float in eager too, and one whose tensor has the dtype ``to_edge`` gives the scalar (int64,
float32, bool) is not widened: both are left alone.
"""

from __future__ import annotations

import contextlib
from numbers import Number
from typing import cast

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram

from executorch_trt.graph.edit import rewrite_calls
from executorch_trt.graph.nodes import copy_provenance

aten = torch.ops.aten

#: The ops whose operands ExecuTorch 1.5.1's ``RemoveMixedTypeOperators`` promotes, with the
#: in-place forms ``torch.export`` keeps before decomposition.
PROMOTED_OPS = frozenset(
    {
        aten.add.Tensor,
        aten.add_.Tensor,
        aten.sub.Tensor,
        aten.sub_.Tensor,
        aten.mul.Tensor,
        aten.mul_.Tensor,
        aten.div.Tensor,
        aten.div_.Tensor,
        aten.div.Tensor_mode,
        aten.div_.Tensor_mode,
        aten.minimum.default,
    }
)


def _rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    operands = node.args[:2]
    tensors = [a for a in operands if isinstance(a, torch.fx.Node)]
    vals = [t.meta.get("val") for t in tensors]
    if len(tensors) != 1 or not isinstance(vals[0], torch.Tensor) or vals[0].dim() != 0:
        return False
    scalar_at = next(
        (i for i, a in enumerate(operands) if isinstance(a, Number) and not isinstance(a, complex)),
        None,
    )
    if scalar_at is None:
        return False
    tensor_val, scalar = vals[0], cast(int | float | bool, operands[scalar_at])
    dtype = torch.result_type(tensor_val, scalar)
    if dtype != tensor_val.dtype:
        return False  # the scalar's kind wins in eager too (int tensor + 0.5 -> float)
    if torch.tensor(scalar).dtype == dtype:
        return False  # what ScalarToTensorPass makes of it already (int64, float32, bool)
    fake_mode = detect_fake_mode([tensor_val]) or contextlib.nullcontext()
    with graph.inserting_before(node):
        operand = graph.call_function(aten.scalar_tensor.default, (scalar,), {"dtype": dtype})
    with fake_mode:
        operand.meta["val"] = aten.scalar_tensor.default(scalar, dtype=dtype)
    copy_provenance(node, operand)
    args = list(node.args)
    args[scalar_at] = operand
    node.args = tuple(args)
    return True


def scalar_operands_as_tensors(ep: ExportedProgram) -> int:
    """Rewrites, in place, every op of ATen program ``ep`` (all its graphs) that the module
    docstring describes; returns how many. Idempotent: a rewritten op has no scalar operand
    left. Nodes without fake values (``meta["val"]``) are left alone. Raises nothing."""
    return rewrite_calls(ep, PROMOTED_OPS, _rewrite)
