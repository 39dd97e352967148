"""``KVCacheUpdatePass``: rewrites KV-cache writes into ``executorch_trt::kv_cache_update``.

Graph shape rewritten (inside one partition, edge dialect)::

    out = aten.index_copy(cache, dim, idx, value)                       # or
    out = aten.index_put(cache, [None] * dim + [idx], value, False)
  ->
    out = executorch_trt.kv_cache_update(cache, value, idx, dim)

where ``idx`` is a 1-D int64 tensor and ``value`` has ``cache``'s shape except
``value.size(dim) == len(idx)`` (no broadcasting). The rewrite is semantics-preserving for any
such write; it gives both engines one op that knows which input it updates (TensorRT: the
``KVCacheUpdate`` layer; portable: the ``kv_cache_update.out`` kernel, which writes only the new
rows when its output shares the cache's storage).

Whether a rewritten write is then *aliased* (updated in place) is decided separately by
``executorch_trt.contract.aliased_outputs``; this pass only changes the op.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import PassBase, PassResult

from executorch_trt import ops as _ops  # noqa: F401

KV_CACHE_UPDATE = exir_ops.edge.executorch_trt.kv_cache_update.default

_INDEX_COPY = "aten::index_copy"
_INDEX_PUT = "aten::index_put"


def _val(node) -> Optional[torch.Tensor]:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


KVWrite = Tuple[torch.fx.Node, torch.fx.Node, torch.fx.Node, int]


def kv_write_args(node: torch.fx.Node) -> Optional[KVWrite]:
    """Returns ``(cache, value, idx, dim)`` if ``node`` is a KV write this pass rewrites,
    ``None`` otherwise."""
    if node.op != "call_function":
        return None
    name = getattr(getattr(node.target, "_schema", None), "name", "")
    if name == _INDEX_COPY:
        cache, dim, idx, value = node.args[:4]
    elif name == _INDEX_PUT:
        cache, indices, value = node.args[:3]
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        if accumulate or not isinstance(indices, (list, tuple)) or not indices:
            return None
        *leading, idx = indices
        if any(i is not None for i in leading):
            return None
        dim = len(leading)
    else:
        return None
    c, v, i = _val(cache), _val(value), _val(idx)
    if c is None or v is None or i is None:
        return None
    if i.dim() != 1 or i.dtype != torch.int64 or c.dim() == 0:
        return None
    dim = dim % c.dim()
    expected = list(c.shape)
    expected[dim] = i.shape[0]
    if list(v.shape) != expected or v.dtype != c.dtype:
        return None
    return cache, value, idx, dim


class KVCacheUpdatePass(PassBase):
    """Rewrites each ``kv_write_args`` match into ``executorch_trt.kv_cache_update``
    (see module docstring). Operates on a partition's graph module in place."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            args = kv_write_args(node)
            if args is None:
                continue
            cache, value, idx, dim = args
            # Rewrite the node itself: its name (which the program's graph signature refers
            # to), meta and users all stay.
            node.target = KV_CACHE_UPDATE
            node.args = (cache, value, idx, dim)
            node.kwargs = {}
            modified = True
        if modified:
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)
