"""Bytes a decode step copies, read off the emitted ExecuTorch program.

ExecuTorch keeps a mutated buffer correct with an explicit write-back: `aten::copy_` (from
`insert_write_back_for_buffers_pass`) of the updated value into the buffer, every call. These
copies are visible as `KernelCall` instructions in the method's execution plan, and their
destination tensors' sizes are static, so the bytes copied per call are exact without running
anything. This module sums them, split into KV-cache bytes and other state (the model's scalar
`cumulative_length_*` counters).

It also reports the *functional update* bytes: an out-of-place `index_put.out` (or
`index_copy.out`) whose input is a KV cache must materialise the whole updated cache in a new
tensor; that is a full cache copy inside the kernel, separate from the write-back.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional, Sequence, Tuple

# Kernels whose only job is to copy their source into their destination (the last argument:
# the emitter appends the return value, which for `copy_` is `self` and for `.out` is `out`).
COPY_KERNELS = frozenset({
    "aten::copy_",
    "aten::copy",
    "executorch_prim::et_copy_index",
})

# Out-of-place updates that must write a complete new tensor the size of their input.
FUNCTIONAL_UPDATE_KERNELS = frozenset({
    "aten::index_put",
    "aten::index_copy",
    "aten::slice_scatter",
})

CACHE_NAME = re.compile(r"(^|\.)(key_cache|value_cache)_\d+$")

# ScalarType enum value -> element size in bytes (ExecuTorch schema numbering).
_ELEMENT_SIZE = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}


@dataclasses.dataclass(frozen=True)
class CopyAccount:
    """Bytes one call of a method copies, by kind (all in bytes).

    * `cache_bytes`: copy kernels writing a KV cache buffer (the write-back of the cache).
    * `other_bytes`: copy kernels writing anything else (e.g. scalar step counters).
    * `functional_update_bytes`: out-of-place updates of a KV cache (a full copy inside the
      kernel; not a write-back, reported separately).
    """

    cache_bytes: int = 0
    other_bytes: int = 0
    functional_update_bytes: int = 0

    @property
    def copy_bytes(self) -> int:
        """All copy-kernel bytes (cache + other)."""
        return self.cache_bytes + self.other_bytes


def tensor_nbytes(tensor) -> int:
    """Bytes of an emitted `schema.Tensor` (static sizes x element size)."""
    scalar_type = int(getattr(tensor.scalar_type, "value", tensor.scalar_type))
    if scalar_type not in _ELEMENT_SIZE:
        raise ValueError(f"copy accounting: unknown ExecuTorch scalar type {tensor.scalar_type}")
    n = _ELEMENT_SIZE[scalar_type]
    for size in tensor.sizes:
        n *= int(size)
    return n


def tensor_fqn(tensor) -> Optional[str]:
    """The mutable-buffer name the program records for `tensor` (needs
    `emit_mutable_buffer_names=True` at export), or None."""
    info = getattr(tensor, "extra_tensor_info", None)
    return getattr(info, "fully_qualified_name", None) or None


def is_cache_tensor(tensor, cache_shapes: Iterable[Tuple[int, ...]] = ()) -> bool:
    """True if `tensor` is a KV cache buffer: by its recorded name, else (no name recorded) by a
    shape in `cache_shapes`."""
    name = tensor_fqn(tensor)
    if name is not None:
        return bool(CACHE_NAME.search(name))
    return tuple(int(s) for s in tensor.sizes) in {tuple(s) for s in cache_shapes}


def _tensor_at(plan, value_index: int):
    value = plan.values[value_index].val
    return value if type(value).__name__ == "Tensor" else None


def _kernel_calls(plan):
    """(operator name, args) of every KernelCall in `plan`, in order."""
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if type(call).__name__ == "KernelCall":
                yield plan.operators[call.op_index].name, list(call.args)


def find_plan(program, method: str):
    """The execution plan named `method` of an emitted `schema.Program`; `KeyError` naming the
    methods it has otherwise."""
    for plan in program.execution_plan:
        if plan.name == method:
            return plan
    names = [p.name for p in program.execution_plan]
    raise KeyError(f"copy accounting: program has no method {method!r} (has {names})")


def account_copies(program, method: str = "decode",
                   cache_shapes: Sequence[Tuple[int, ...]] = ()) -> CopyAccount:
    """Bytes one call of `method` copies, from `program` (`ExecutorchProgramManager
    .executorch_program`). Counts each copy kernel's destination tensor and each functional
    cache update's output tensor."""
    plan = find_plan(program, method)
    cache = other = functional = 0
    for op_name, args in _kernel_calls(plan):
        if op_name in COPY_KERNELS:
            dest = _tensor_at(plan, args[-1])
            if dest is None:
                continue
            if is_cache_tensor(dest, cache_shapes):
                cache += tensor_nbytes(dest)
            else:
                other += tensor_nbytes(dest)
        elif op_name in FUNCTIONAL_UPDATE_KERNELS:
            src, dest = _tensor_at(plan, args[0]), _tensor_at(plan, args[-1])
            if src is not None and dest is not None and args[0] != args[-1] \
                    and is_cache_tensor(src, cache_shapes):
                functional += tensor_nbytes(dest)
    return CopyAccount(cache, other, functional)
