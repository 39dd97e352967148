"""The operators the portable engine implements: every group of ``op_groups`` (a decoder block
end to end).

The nested program runs them on ExecuTorch's own CPU kernels (the portable and optimized
kernel libraries the wheel ships), and ``executorch_trt::kv_cache_update.out`` on the delegate
library's kernel (``core/kernels``), which writes only the new rows when the binding plan gives
the output its cache's storage.

It also takes a whole ``torch.cond`` (predicate, both branches) whose branches use only these
operators, including ExecuTorch's cross-attention cache ops: the nested program runs it as
``JumpFalseCall`` control flow, so the branch not taken costs nothing, and the cache update
writes into the cache the caller bound (``passes/cross_attn_cache.py``).
"""

from __future__ import annotations

from executorch_trt.engines import op_groups

#: Schema names (``namespace::name``) the portable engine takes.
SUPPORTED_OPS: frozenset[str] = (
    op_groups.DECODER | op_groups.CROSS_ATTN_CACHE | op_groups.CONTROL_FLOW | op_groups.QUANTIZED
)
