"""Queries over one method's execution plan: its tensors, instructions and kernel calls, and
the bytes each copy instruction writes.

ExecuTorch keeps a mutated buffer correct with an explicit write-back: an ``aten::copy_``
(inserted by ``insert_write_back_for_buffers_pass``) of the updated value into the buffer, on
every call. Such copies are ``KernelCall`` instructions of the method's execution plan and their
tensors' sizes are static, so the bytes a call copies are exact without running anything.
Used by ``executorch_trt.inspect`` and the decode benchmark (``benchmarks/copy_accounting.py``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import cast

import torch
from executorch.exir import schema
from executorch.exir.scalar_type import ScalarType
from executorch.exir.tensor import get_scalar_type

#: Kernels whose only job is to copy a source tensor into a destination tensor.
#: ``aten::copy_`` is ExecuTorch's write-back (args ``[self, src, non_blocking, self]``),
#: ``aten::copy`` its out variant (``[self, src, non_blocking, out, out]``),
#: ``executorch_prim::et_copy_index`` the copy of one ``torch.map`` iteration's output into a
#: slice of the accumulator (args ``[accumulator, item, index]``, emitter ``_emit_map``).
COPY_KERNELS = frozenset(
    {
        "aten::copy_",
        "aten::copy",
        "executorch_prim::et_copy_index",
    }
)

#: Out-of-place updates that write a complete new tensor the size of their ``self`` input
#: (``args[0]``) into their output (``args[-1]``): a full copy of ``self`` inside the kernel.
FUNCTIONAL_UPDATE_KERNELS = frozenset(
    {
        "aten::index_put",
        "aten::index_copy",
        "aten::slice_scatter",
        "aten::select_scatter",
    }
)


def find_plan(program: schema.Program, method: str) -> schema.ExecutionPlan:
    """The execution plan named ``method``; ``KeyError`` naming the methods it has otherwise."""
    for plan in program.execution_plan:
        if plan.name == method:
            return plan
    names = [p.name for p in program.execution_plan]
    raise KeyError(f"program has no method {method!r} (it has {names})")


def tensor_at(plan: schema.ExecutionPlan, value_index: int) -> schema.Tensor | None:
    """The tensor at ``plan.values[value_index]``, or None if that value is not a tensor."""
    if not 0 <= value_index < len(plan.values):
        return None
    value = plan.values[value_index].val
    return value if isinstance(value, schema.Tensor) else None


def state_tensor(plan: schema.ExecutionPlan, value_index: int) -> schema.Tensor:
    """``tensor_at`` for a value known to be a tensor (a mutable buffer or one of its views,
    which the state analysis only finds among the plan's tensors)."""
    return cast(schema.Tensor, tensor_at(plan, value_index))


def tensor_dtype(tensor: schema.Tensor) -> torch.dtype:
    """The ``torch.dtype`` of an emitted tensor; ``ValueError`` for an unknown scalar type."""
    try:
        return get_scalar_type(ScalarType(int(tensor.scalar_type)))
    except (KeyError, ValueError):
        raise ValueError(f"unknown ExecuTorch scalar type {tensor.scalar_type!r}") from None


def dtype_name(tensor: schema.Tensor) -> str:
    """``"float32"``, ``"int64"``, ... (torch's name without ``torch.``)."""
    return str(tensor_dtype(tensor)).replace("torch.", "")


def tensor_nbytes(tensor: schema.Tensor) -> int:
    """Bytes of an emitted tensor: static sizes x element size. ``ValueError`` for an unknown
    scalar type."""
    n = tensor_dtype(tensor).itemsize
    for size in tensor.sizes:
        n *= int(size)
    return n


def tensor_fqn(tensor: schema.Tensor) -> str | None:
    """The mutable buffer's fully qualified name the program records for ``tensor``, or None.

    The emitter records it only for mutable buffers and only when exported with
    ``emit_mutable_buffer_names=True`` (``_emitter.placeholder``); an external constant also
    carries a name but with ``location == EXTERNAL`` and is not returned."""
    info = getattr(tensor, "extra_tensor_info", None)
    if info is None or not info.fully_qualified_name:
        return None
    if int(info.location) != int(schema.TensorDataLocation.SEGMENT):
        return None
    return cast(str, info.fully_qualified_name)


def operator_name(plan: schema.ExecutionPlan, op_index: int) -> str:
    """``"aten::mul.out"``: the operator's name and overload (no overload: just the name)."""
    op = plan.operators[op_index]
    return f"{op.name}.{op.overload}" if op.overload else op.name


def instructions(plan: schema.ExecutionPlan) -> Iterator[tuple[int, object]]:
    """(position, instruction arguments) of every instruction of every chain, in order;
    positions count across chains."""
    position = 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            yield position, instruction.instr_args
            position += 1


def kernel_calls(plan: schema.ExecutionPlan) -> Iterator[tuple[int, str, list[int]]]:
    """(position, operator name without overload, args) of every ``KernelCall``, in order."""
    for position, call in instructions(plan):
        if isinstance(call, schema.KernelCall):
            yield position, plan.operators[call.op_index].name, list(call.args)


@dataclasses.dataclass(frozen=True)
class Copy:
    """One instruction that writes ``nbytes`` bytes of ``source`` into ``destination``
    (value ids of the plan) on each execution. ``op`` is the operator name (no overload)."""

    position: int
    op: str
    source: int
    destination: int
    nbytes: int


def copies(plan: schema.ExecutionPlan) -> list[Copy]:
    """Every copy kernel (``COPY_KERNELS``) of ``plan`` whose destination is a tensor.

    ``aten::copy_``/``aten::copy``: destination = the last argument (the emitter appends the
    return value: ``self`` for ``copy_``, ``out`` for ``copy.out``), bytes = the destination's
    size. ``et_copy_index``: destination = ``args[0]``, bytes = the copied item's size (per
    execution of the instruction; inside a ``torch.map`` loop it runs once per iteration)."""
    found = []
    for position, op, args in kernel_calls(plan):
        if op not in COPY_KERNELS or len(args) < 2:
            continue
        if op == "executorch_prim::et_copy_index":
            destination, source, sized = args[0], args[1], args[1]
        else:
            destination, source, sized = args[-1], args[1], args[-1]
        dest_tensor, sized_tensor = tensor_at(plan, destination), tensor_at(plan, sized)
        if dest_tensor is None or sized_tensor is None:
            continue
        found.append(Copy(position, op, source, destination, tensor_nbytes(sized_tensor)))
    return found


def functional_updates(plan: schema.ExecutionPlan) -> list[Copy]:
    """Every out-of-place update kernel (``FUNCTIONAL_UPDATE_KERNELS``) that writes a new
    tensor (``args[-1]``, a different value from ``args[0]``) holding all of ``args[0]``
    updated: ``source`` = ``args[0]``, ``nbytes`` = the output's size."""
    found = []
    for position, op, args in kernel_calls(plan):
        if op not in FUNCTIONAL_UPDATE_KERNELS or len(args) < 2 or args[0] == args[-1]:
            continue
        src, dest = tensor_at(plan, args[0]), tensor_at(plan, args[-1])
        if src is not None and dest is not None:
            found.append(Copy(position, op, args[0], args[-1], tensor_nbytes(dest)))
    return found


def describe_value(plan: schema.ExecutionPlan, value_index: int) -> str:
    """A stable description of a tensor value: ``"value 12 [1, 2, 8, 4] float32"``."""
    tensor = tensor_at(plan, value_index)
    if tensor is None:
        return f"value {value_index}"
    return f"value {value_index} {[int(s) for s in tensor.sizes]} {dtype_name(tensor)}"


def sizes(tensor: schema.Tensor) -> tuple[int, ...]:
    """The tensor's static sizes as a tuple of ints."""
    return tuple(int(s) for s in tensor.sizes)


@functools.cache
def _schema(name: str, overload: str) -> torch.FunctionSchema | None:
    try:
        return torch._C._get_schema(name, overload)
    except RuntimeError:  # not registered in this process (e.g. a custom op library not loaded)
        return None


def kernel_effects(
    plan: schema.ExecutionPlan, call: schema.KernelCall
) -> tuple[list[int], list[int]]:
    """(values read, values written) by one ``KernelCall``, from the operator's schema.

    The emitter passes a kernel its schema arguments in order, then its return values
    (``[self, other, out, out]`` for ``aten::mul.out``). An ``out`` argument and every return
    is written; a mutable argument that is not ``out`` (``self`` of ``index_put_``/``copy_``)
    is read and written; every other argument is read. Values inside lists are not included.
    For an operator not registered in this process (or whose argument count does not match its
    schema) the last argument is taken as written and the others as read."""
    op = plan.operators[call.op_index]
    args = list(call.args)
    fn_schema = _schema(op.name, op.overload or "")
    if fn_schema is None or len(args) != len(fn_schema.arguments) + len(fn_schema.returns):
        return args[:-1], args[-1:]
    reads, writes = [], []
    for value, argument in zip(args, fn_schema.arguments):
        if argument.is_out:
            writes.append(value)
        elif argument.alias_info is not None and argument.alias_info.is_write:
            reads.append(value)
            writes.append(value)
        else:
            reads.append(value)
    writes.extend(args[len(fn_schema.arguments) :])
    return reads, writes
