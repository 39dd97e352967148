"""The ``executorch_trt::kv_cache_update`` custom op (functional and ``.out``).

Schema (shared with the C++ kernel in ``core/kernels``; keep the two identical)::

    executorch_trt::kv_cache_update(Tensor cache, Tensor value, Tensor indices, int dim) -> Tensor
    executorch_trt::kv_cache_update.out(Tensor cache, Tensor value, Tensor indices, int dim,
                                        *, Tensor(a!) out) -> Tensor(a!)

Semantics are ``index_copy``: the result equals ``cache`` except that
``result.select(dim, indices[i]) == value.select(dim, i)`` for every ``i``.

* ``cache``: any dtype, rank ``r``; ``value``: same dtype and rank, same sizes as ``cache``
  except along ``dim``; ``indices``: int64, 1-D, ``len(indices) == value.size(dim)``, every
  entry in ``[0, cache.size(dim))``.
* The functional form never mutates ``cache``. The ``.out`` form is what ``to_executorch``'s
  out-variant pass selects; when ``out`` shares storage with ``cache`` (the delegate's in-place
  binding) the C++ kernel writes only the new rows, otherwise it copies ``cache`` first.

Errors: ``ValueError`` (eager/fake) when the shapes, dtypes or index rank disagree.
"""

from __future__ import annotations

import torch

NAMESPACE = "executorch_trt"
OP_NAME = "kv_cache_update"
SCHEMA = "kv_cache_update(Tensor cache, Tensor value, Tensor indices, int dim) -> Tensor"
OUT_SCHEMA = (
    "kv_cache_update.out(Tensor cache, Tensor value, Tensor indices, int dim, *, "
    "Tensor(a!) out) -> Tensor(a!)"
)


def _check(cache: torch.Tensor, value: torch.Tensor, indices: torch.Tensor, dim: int) -> int:
    """Validates the arguments; returns ``dim`` normalised to ``[0, cache.dim())``."""
    if cache.dim() == 0:
        raise ValueError("kv_cache_update: cache must have rank >= 1")
    if not -cache.dim() <= dim < cache.dim():
        raise ValueError(f"kv_cache_update: dim {dim} out of range for rank {cache.dim()}")
    dim = dim % cache.dim()
    if value.dim() != cache.dim():
        raise ValueError(f"kv_cache_update: value rank {value.dim()} != cache rank {cache.dim()}")
    if value.dtype != cache.dtype:
        raise ValueError(f"kv_cache_update: value dtype {value.dtype} != cache dtype {cache.dtype}")
    for d in range(cache.dim()):
        if d != dim and value.shape[d] != cache.shape[d]:
            raise ValueError(
                f"kv_cache_update: value size {tuple(value.shape)} does not match cache size "
                f"{tuple(cache.shape)} outside dim {dim}"
            )
    if indices.dim() != 1 or indices.dtype != torch.int64:
        raise ValueError(
            f"kv_cache_update: indices must be 1-D int64, got {indices.dim()}-D {indices.dtype}"
        )
    if indices.shape[0] != value.shape[dim]:
        raise ValueError(
            f"kv_cache_update: len(indices)={indices.shape[0]} != value.size({dim})="
            f"{value.shape[dim]}"
        )
    return dim


_lib = torch.library.Library(NAMESPACE, "DEF")
_lib.define(SCHEMA)
_lib.define(OUT_SCHEMA)


def _kv_cache_update(
    cache: torch.Tensor, value: torch.Tensor, indices: torch.Tensor, dim: int
) -> torch.Tensor:
    dim = _check(cache, value, indices, dim)
    return cache.index_copy(dim, indices, value)


def _kv_cache_update_out(
    cache: torch.Tensor, value: torch.Tensor, indices: torch.Tensor, dim: int, *, out: torch.Tensor
) -> torch.Tensor:
    dim = _check(cache, value, indices, dim)
    if out.data_ptr() != cache.data_ptr():
        out.resize_(cache.shape)
        out.copy_(cache)
    out.index_copy_(dim, indices, value)
    return out


def _kv_cache_update_fake(
    cache: torch.Tensor, value: torch.Tensor, indices: torch.Tensor, dim: int
) -> torch.Tensor:
    _check(cache, value, indices, dim)
    return torch.empty_like(cache)


def _kv_cache_update_out_fake(
    cache: torch.Tensor, value: torch.Tensor, indices: torch.Tensor, dim: int, *, out: torch.Tensor
) -> torch.Tensor:
    _check(cache, value, indices, dim)
    return out


_lib.impl(OP_NAME, _kv_cache_update, "CompositeExplicitAutograd")
_lib.impl("kv_cache_update.out", _kv_cache_update_out, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::{OP_NAME}", _kv_cache_update_fake, lib=_lib)
torch.library.register_fake(f"{NAMESPACE}::{OP_NAME}.out", _kv_cache_update_out_fake, lib=_lib)

#: The functional overload, ``torch.ops.executorch_trt.kv_cache_update.default``.
kv_cache_update = torch.ops.executorch_trt.kv_cache_update.default
#: The out overload, ``torch.ops.executorch_trt.kv_cache_update.out``.
kv_cache_update_out = torch.ops.executorch_trt.kv_cache_update.out
