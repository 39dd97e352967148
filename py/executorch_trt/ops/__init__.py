"""The delegate's operators, registered with torch on import (each module states its schema,
shared with its C++ kernel in ``core/kernels``):

* ``kv_cache_update``: ``executorch_trt::kv_cache_update`` (an ``index_copy`` the engine writes in
  place into the caller's cache);
* ``gqa_attention``: ``executorch_trt::gqa_attention`` (SDPA with grouped KV heads, reading the
  caches in place and only where the mask allows);
* ``cross_attn_cache``: the ``.out`` overloads of ExecuTorch's ``torch.cond`` cache ops
  ``executorch::alias`` and ``executorch::update_cross_attn_cache``.
"""

from executorch_trt.ops import cross_attn_cache, gqa_attention, kv_cache_update  # noqa: F401
