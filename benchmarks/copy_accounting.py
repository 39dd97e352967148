"""Bytes a decode step copies, read off the emitted ExecuTorch program, split into KV-cache
bytes and other state (the model's scalar `cumulative_length_*` counters).

ExecuTorch keeps a mutated buffer correct with an explicit write-back (`aten::copy_` of the
updated value into the buffer, every call); the copies and their static sizes come from
`executorch_trt.inspection.plan` (the same reading `executorch_trt.inspect` uses), this module
only attributes them to caches.

It also reports the *functional update* bytes: an out-of-place `index_put.out` (or
`index_copy.out`) whose input is a KV cache must materialise the whole updated cache in a new
tensor; that is a full cache copy inside the kernel, separate from the write-back.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from executorch_trt.inspection.plan import (  # noqa: F401  (re-exported for callers)
    COPY_KERNELS,
    FUNCTIONAL_UPDATE_KERNELS,
    copies,
    find_plan,
    functional_updates,
    tensor_at,
    tensor_fqn,
    tensor_nbytes,
)

CACHE_NAME = re.compile(r"(^|\.)(key_cache|value_cache)_\d+$")


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


def is_cache_tensor(tensor, cache_shapes: Iterable[tuple[int, ...]] = ()) -> bool:
    """True if `tensor` is a KV cache buffer: by its recorded name, else (no name recorded) by a
    shape in `cache_shapes`."""
    name = tensor_fqn(tensor)
    if name is not None:
        return bool(CACHE_NAME.search(name))
    return tuple(int(s) for s in tensor.sizes) in {tuple(s) for s in cache_shapes}


def account_copies(
    program, method: str = "decode", cache_shapes: Sequence[tuple[int, ...]] = ()
) -> CopyAccount:
    """Bytes one call of `method` copies, from `program` (`ExecutorchProgramManager
    .executorch_program`). Counts each copy kernel's destination and each functional cache
    update's output (`plan.copies` / `functional_updates`); `KeyError` naming the
    methods when `method` is missing."""
    plan = find_plan(program, method)
    cache = other = functional = 0
    for copy in copies(plan):
        if is_cache_tensor(tensor_at(plan, copy.destination), cache_shapes):
            cache += copy.nbytes
        else:
            other += copy.nbytes
    for update in functional_updates(plan):
        if is_cache_tensor(tensor_at(plan, update.source), cache_shapes):
            functional += update.nbytes
    return CopyAccount(cache, other, functional)
