"""The delegate library's process-wide counters, read through ``ctypes``: the bytes its
in-place binding copied, and what its own kernels did (tests and benchmarks read them to show
that a step copied no state and attended only the positions the mask allows)."""

from __future__ import annotations

import ctypes

from executorch_trt.runtime.library import load_library


def bytes_copied() -> int:
    """Bytes the delegate has copied in this process (cumulative, all loaded programs): the
    reflect copies it makes when ExecuTorch hands it an aliased output that is a separate
    tensor (copy-back / stock finalisation). 0 across decode steps means the in-place
    contract held (``docs/contract.md`` 2, "In place"). Reads ``executorch_trt_bytes_copied()``."""
    fn = load_library().executorch_trt_bytes_copied
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())


def cross_attn_cache_updates() -> int:
    """How many times ``executorch::update_cross_attn_cache.out`` has written a cache in this
    process (cumulative, all loaded programs, plain or delegated): one per run of a
    ``torch.cond`` recompute branch. A decode step that reuses its cross-attention caches adds
    0. Reads ``executorch_trt_cross_attn_cache_updates()`` (``core/kernels/cross_attn_cache.h``).
    """
    fn = load_library().executorch_trt_cross_attn_cache_updates
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())


def gqa_attention_positions_read() -> int:
    """How many (query row, key position) pairs ``executorch_trt::gqa_attention.out`` has
    attended in this process (cumulative, all loaded programs): a decode step at position ``p``
    under a causal mask adds ``layers * query_heads * (p + 1)`` whatever the cache's capacity,
    because the kernel skips the positions the mask excludes. Reads
    ``executorch_trt_gqa_attention_positions_read()`` (``core/kernels/gqa_attention.h``)."""
    fn = load_library().executorch_trt_gqa_attention_positions_read
    fn.restype = ctypes.c_uint64
    fn.argtypes = []
    return int(fn())
