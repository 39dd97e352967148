"""The ``executorch_trt::gqa_attention`` custom op (functional and ``.out``).

Schema (shared with the C++ kernel ``core/kernels/gqa_attention.h``; keep the two identical)::

    executorch_trt::gqa_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask,
                                  bool is_causal, float scale) -> Tensor
    executorch_trt::gqa_attention.out(..., *, Tensor(a!) out) -> Tensor(a!)

Semantics are ``torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask,
dropout_p=0.0, is_causal=is_causal, scale=scale, enable_gqa=True)``:

* ``query`` ``[B, H_q, T, E]``, ``key`` ``[B, H_kv, S, E]``, ``value`` ``[B, H_kv, S, E_v]``,
  all float32; ``H_q`` a multiple of ``H_kv`` (query head ``h`` reads key/value head
  ``h // (H_q // H_kv)``, as ``transformers``' ``repeat_kv`` and SDPA's ``enable_gqa`` group
  them); ``attn_mask`` ``None``, bool (``True`` = attend) or float32 (added), broadcastable to
  ``[B, H_q, T, S]``; ``scale`` explicit (SDPA's default is ``1 / sqrt(E)``).
* Result ``[B, H_q, T, E_v]``; a row the mask allows nowhere is zeros (as PyTorch's SDPA).

``passes.gqa_attention`` puts it in the portable engine's nested program in place of
``repeat_kv`` + ``aten.scaled_dot_product_attention``; the C++ kernel reads the caches in place
and only at the positions the mask allows. Errors: ``ValueError`` (eager/fake) for a dtype,
rank or size the kernel rejects.
"""

from __future__ import annotations

from typing import Any

import torch

NAMESPACE = "executorch_trt"
OP_NAME = "gqa_attention"
_ARGS = "Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float scale"
SCHEMA = f"{OP_NAME}({_ARGS}) -> Tensor"
OUT_SCHEMA = f"{OP_NAME}.out({_ARGS}, *, Tensor(a!) out) -> Tensor(a!)"


def check_arguments(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
) -> str | None:
    """Why the kernel would reject these arguments (the C++ kernel's checks, on shapes and
    dtypes only), or ``None`` when it takes them. Works on fake tensors (``meta["val"]``)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dtype != torch.float32 or t.dim() != 4:
            return f"{name} is {t.dim()}-D {t.dtype}, the kernel takes 4-D float32"
    batch, q_heads, q_len, depth = query.shape
    if (
        key.shape[0] != batch
        or key.shape[3] != depth
        or value.shape[0] != batch
        or tuple(value.shape[1:3]) != tuple(key.shape[1:3])
    ):
        return (
            f"shapes query {tuple(query.shape)}, key {tuple(key.shape)}, value "
            f"{tuple(value.shape)} are not [B, H_q, T, E], [B, H_kv, S, E], "
            "[B, H_kv, S, E_v]"
        )
    if key.shape[1] == 0 or q_heads % key.shape[1] != 0:
        return f"{q_heads} query heads are not a multiple of {key.shape[1]} key/value heads"
    if attn_mask is None:
        return None
    if is_causal:
        return "is_causal with an attn_mask"
    if attn_mask.dtype not in (torch.bool, torch.float32) or attn_mask.dim() > 4:
        return f"attn_mask is {attn_mask.dim()}-D {attn_mask.dtype}, not bool/float32 rank <= 4"
    full = (batch, q_heads, q_len, key.shape[2])
    sizes = (1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape)
    if any(s not in (1, f) for s, f in zip(sizes, full)):
        return f"attn_mask {tuple(attn_mask.shape)} does not broadcast to {full}"
    return None


def _check(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
) -> None:
    reason = check_arguments(query, key, value, attn_mask, is_causal)
    if reason is not None:
        raise ValueError(f"gqa_attention: {reason}")


def _gqa_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float | None,
) -> torch.Tensor:
    _check(query, key, value, attn_mask, is_causal)
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=True
    )


def _gqa_attention_out(*args: Any, out: torch.Tensor) -> torch.Tensor:
    """``_gqa_attention(*args)`` (the schema's arguments, checked there) written into ``out``."""
    result = _gqa_attention(*args)
    out.resize_(result.shape)
    out.copy_(result)
    return out


def _gqa_attention_fake(*args: Any) -> torch.Tensor:
    """The result's shape for the schema's arguments, checked as ``_gqa_attention`` does."""
    _check(*args[:5])
    query: torch.Tensor = args[0]
    value: torch.Tensor = args[2]
    return query.new_empty((*query.shape[:3], value.shape[3]))


def _gqa_attention_out_fake(*args: Any, out: torch.Tensor) -> torch.Tensor:
    """The schema's arguments as ``_gqa_attention_fake`` checks them (all but ``scale``)."""
    _check(*args[:5])
    return out


_lib = torch.library.Library(NAMESPACE, "FRAGMENT")
_lib.define(SCHEMA)
_lib.define(OUT_SCHEMA)
_lib.impl(OP_NAME, _gqa_attention, "CompositeExplicitAutograd")
_lib.impl(f"{OP_NAME}.out", _gqa_attention_out, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::{OP_NAME}", _gqa_attention_fake, lib=_lib)
torch.library.register_fake(f"{NAMESPACE}::{OP_NAME}.out", _gqa_attention_out_fake, lib=_lib)

#: The functional overload, ``torch.ops.executorch_trt.gqa_attention.default``.
gqa_attention = torch.ops.executorch_trt.gqa_attention.default
#: The out overload, ``torch.ops.executorch_trt.gqa_attention.out``.
gqa_attention_out = torch.ops.executorch_trt.gqa_attention.out
