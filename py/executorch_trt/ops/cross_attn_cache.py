"""ExecuTorch's ``torch.cond`` cache ops, made runnable: their ``.out`` overloads.

ExecuTorch 1.5.1 defines two ops for a cross-attention cache under ``torch.cond``, in Python
only (``executorch/extension/llm/custom_ops/custom_ops.py``, imported here; the names are not
redefined)::

    executorch::alias(Tensor x, Tensor y) -> (Tensor, Tensor)
    executorch::update_cross_attn_cache(Tensor value, Tensor cache) -> Tensor

and no ``.out`` variants, so ``to_executorch()`` fails with ``Missing out variants``. This
module adds them (the C++ kernels are ``core/kernels/cross_attn_cache.h``, in
``libexecutorch_trt``)::

    executorch::alias.out(Tensor x, Tensor y, *, Tensor(a!) out0, Tensor(b!) out1)
        -> (Tensor(a!), Tensor(b!))
    executorch::update_cross_attn_cache.out(Tensor value, Tensor cache, *, Tensor(a!) out)
        -> Tensor(a!)

Semantics: ``alias.out`` writes ``x`` into ``out0`` and ``y`` into ``out1`` (nothing to do
when they already share storage). ``update_cross_attn_cache.out`` writes ``cache`` with
``cache[:, :, :S, :] = value`` (``value`` ``[B, H, S, D]``, ``cache`` ``[B, H, S_max, D]``,
``S <= S_max``, same dtype) into ``out``; when ``out`` is the cache's storage only the first
``S`` rows of each head are written. Note the upstream eager functional op writes into
``cache`` *and* returns a copy, while the lowered program returns the cache itself.

``import executorch_trt`` imports this module. Errors: ``ValueError`` (eager/fake ``.out``)
naming the mismatching argument.
"""

from __future__ import annotations

import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (defines the two ops)
import torch
from executorch.exir.dialects._ops import ops as exir_ops

ALIAS_OUT_SCHEMA = (
    "alias.out(Tensor x, Tensor y, *, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))"
)
UPDATE_OUT_SCHEMA = (
    "update_cross_attn_cache.out(Tensor value, Tensor cache, *, Tensor(a!) out) -> Tensor(a!)"
)


def _check_update(value: torch.Tensor, cache: torch.Tensor) -> None:
    """The checks of custom_ops.py's ``_validate_cross_attn_cache_params``, as ValueErrors."""
    if value.dim() != 4 or cache.dim() != 4:
        raise ValueError(
            "update_cross_attn_cache: value and cache must be 4-D [B, H, S, D], "
            f"got rank {value.dim()} and {cache.dim()}"
        )
    if value.dtype != cache.dtype:
        raise ValueError(
            f"update_cross_attn_cache: value dtype {value.dtype} != cache dtype {cache.dtype}"
        )
    for d, what in ((0, "batch"), (1, "heads"), (3, "head dim")):
        if value.shape[d] != cache.shape[d]:
            raise ValueError(
                f"update_cross_attn_cache: {what} differ: value "
                f"{tuple(value.shape)}, cache {tuple(cache.shape)}"
            )
    if value.shape[2] > cache.shape[2]:
        raise ValueError(
            f"update_cross_attn_cache: value sequence length {value.shape[2]} "
            f"exceeds the cache's {cache.shape[2]}"
        )


def _check_out(name: str, like: torch.Tensor, out: torch.Tensor) -> None:
    if out.dtype != like.dtype:
        raise ValueError(f"{name} has dtype {out.dtype}, expected {like.dtype}")


def _write(src: torch.Tensor, out: torch.Tensor) -> None:
    if out.data_ptr() != src.data_ptr():
        out.resize_(src.shape)
        out.copy_(src)


def _update_out(value: torch.Tensor, cache: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    _check_update(value, cache)
    _check_out("update_cross_attn_cache.out: out", cache, out)
    _write(cache, out)
    out[:, :, : value.shape[2], :].copy_(value)
    return out


def _update_out_fake(
    value: torch.Tensor, cache: torch.Tensor, *, out: torch.Tensor
) -> torch.Tensor:
    _check_update(value, cache)
    _check_out("update_cross_attn_cache.out: out", cache, out)
    return out


def _alias_out(
    x: torch.Tensor, y: torch.Tensor, *, out0: torch.Tensor, out1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_out("alias.out: out0", x, out0)
    _check_out("alias.out: out1", y, out1)
    _write(x, out0)
    _write(y, out1)
    return out0, out1


def _alias_out_fake(
    x: torch.Tensor, y: torch.Tensor, *, out0: torch.Tensor, out1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_out("alias.out: out0", x, out0)
    _check_out("alias.out: out1", y, out1)
    return out0, out1


_lib = torch.library.Library("executorch", "FRAGMENT")
_lib.define(ALIAS_OUT_SCHEMA)
_lib.define(UPDATE_OUT_SCHEMA)
_lib.impl("alias.out", _alias_out, "CompositeExplicitAutograd")
_lib.impl("update_cross_attn_cache.out", _update_out, "CompositeExplicitAutograd")
torch.library.register_fake("executorch::alias.out", _alias_out_fake, lib=_lib)
torch.library.register_fake("executorch::update_cross_attn_cache.out", _update_out_fake, lib=_lib)

# The op writes its cache (eager does): without this, a call whose result is unused is dead
# code to torch.fx, and to_edge removes it, and with it the write, before any check sees it.
torch.fx.node.has_side_effect(torch.ops.executorch.update_cross_attn_cache.default)
torch.fx.node.has_side_effect(exir_ops.edge.executorch.update_cross_attn_cache.default)

#: ``torch.ops.executorch.alias.default`` (ExecuTorch's) and its ``.out`` overload (ours).
alias = torch.ops.executorch.alias.default
alias_out = torch.ops.executorch.alias.out
#: ``torch.ops.executorch.update_cross_attn_cache.default`` (ExecuTorch's) and ``.out`` (ours).
update_cross_attn_cache = torch.ops.executorch.update_cross_attn_cache.default
update_cross_attn_cache_out = torch.ops.executorch.update_cross_attn_cache.out
