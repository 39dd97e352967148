"""``scalar_operands_as_tensors``: a Python scalar operand of an op whose tensor operand is
0-d becomes a 0-d tensor of the op's eager result dtype, before decomposition, where that is
exactly what eager computes, so that ExecuTorch's edge lowering computes the op in eager's
dtype.

Why: in eager PyTorch a Python scalar is a "wrapped number" that does not widen a tensor's dtype
of the same kind: ``count.add_(1)`` on a 0-d int16 buffer stays int16 (and wraps). ExecuTorch
1.5.1's ``to_edge`` turns a scalar in a Tensor argument into a plain 0-d int64 (float32) tensor
(``ScalarToTensorPass``), and two 0-d operands then promote to the wider dtype: the update and
everything computed from it run in int64, so arithmetic after it does not wrap, the method
returns int64 where eager returns int16, and a buffer's new value no longer has the buffer's
dtype (which the partitioner refuses). A tensor with a dimension is not affected (a 0-d
operand does not widen it).

The pass rewrites, in every graph of an ATen program (control-flow branches included), each op
with one tensor operand, 0-d, and a Python scalar where its schema takes a Tensor::

    add_(count, 1)                       # count: 0-d int16
  ->
    add_(count, scalar_tensor(1, dtype=int16))

where the dtype is ``torch.result_type`` of the two (eager's rule), and only where the scalar
converted to it is what eager computes with:
* integer and bool dtypes: a scalar the dtype holds (eager wraps a larger one; ExecuTorch's
  ``scalar_tensor`` refuses it);
* float64: any finite scalar (a float32 constant would round 0.1);
* float16 and bfloat16: ``add``/``sub`` with a scalar the dtype holds (eager rounds their scalar
  to the dtype; its ``mul``/``div`` use it unrounded, in float32, so those are left alone).
Left alone, ``to_edge`` widens the op as before; a buffer updated that way is refused by the
partitioner (``graph.mutations.mismatched_buffer_mutation_error``). Ops whose scalar is of a
higher kind than the tensor (``int_count + 0.5``: a float in eager too) or already has the
dtype ``to_edge`` gives it (int64, float32, bool) are not changed.
"""

from __future__ import annotations

import contextlib
import math
from numbers import Number
from typing import Any, cast

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram

from executorch_trt.graph.edit import rewrite_calls
from executorch_trt.graph.nodes import copy_provenance

aten = torch.ops.aten

#: Ops whose float16/bfloat16 result eager computes with the scalar rounded to the dtype.
ROUNDED_SCALAR_OPS = frozenset(
    {aten.add.Tensor, aten.add_.Tensor, aten.sub.Tensor, aten.sub_.Tensor}
)


def _holds(dtype: torch.dtype, scalar: int | float | bool) -> bool:
    """Whether ``dtype`` holds ``scalar`` exactly (integers) or without overflow (floats)."""
    if dtype == torch.bool or isinstance(scalar, bool):
        return True
    if dtype.is_floating_point:
        return math.isfinite(scalar) and abs(scalar) <= torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    return isinstance(scalar, int) and info.min <= scalar <= info.max


def _exact(op: Any, dtype: torch.dtype, scalar: int | float | bool) -> bool:
    """Whether ``op`` computed with ``scalar`` converted to ``dtype`` is what eager computes."""
    if not _holds(dtype, scalar):
        return False
    if dtype in (torch.float16, torch.bfloat16):
        return op in ROUNDED_SCALAR_OPS
    return True


def _tensor_positions(node: torch.fx.Node) -> list[int]:
    """The positions of ``node``'s arguments its schema types as Tensor."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    return [
        i
        for i, arg in enumerate(schema.arguments[: len(node.args)])
        if isinstance(arg.type, torch.TensorType)
    ]


def _rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    positions = _tensor_positions(node)
    tensors = [node.args[i] for i in positions if isinstance(node.args[i], torch.fx.Node)]
    scalars = [
        i
        for i in positions
        if isinstance(node.args[i], Number) and not isinstance(node.args[i], complex)
    ]
    if len(tensors) != 1 or len(scalars) != 1:
        return False
    tensor_val = cast(torch.fx.Node, tensors[0]).meta.get("val")
    if not isinstance(tensor_val, torch.Tensor) or tensor_val.dim() != 0:
        return False
    scalar_at = scalars[0]
    scalar = cast(int | float | bool, node.args[scalar_at])
    dtype = torch.result_type(tensor_val, scalar)
    if dtype != tensor_val.dtype:
        return False  # the scalar's kind wins in eager too (int tensor + 0.5 -> float)
    if torch.tensor(scalar).dtype == dtype:
        return False  # what ScalarToTensorPass makes of it already (int64, float32, bool)
    if not _exact(node.target, dtype, scalar):
        return False
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
    return rewrite_calls(ep, None, _rewrite)
