"""``use_gqa_attention``: scaled dot-product attention over the caches as they are, in the
portable engine's nested program.

``transformers``' SDPA attention repeats each key/value head for its group of query heads
(``repeat_kv``) and attends over the whole static cache with a mask that excludes the
unfilled positions. Decomposed by ``to_edge``, that is two cache-sized copies per layer and
step plus matrix products over every position of the capacity, so a step's cost grows with
the capacity, not with the positions filled. The partitioner keeps
``aten.scaled_dot_product_attention`` whole (``partitioner.ops_to_not_decompose``,
``sdpa_kept_whole``), and this pass rewrites each one in a partition (top-level graph)::

    k = view_copy(expand_copy(unsqueeze_copy(key_cache, 2), [B, H_kv, n, S, D]), [B, H_kv*n, S, D])
    v = (the same over value_cache)
    o = scaled_dot_product_attention(q, k, v, mask, 0.0, is_causal, scale=s, enable_gqa=g)
  ->
    o = executorch_trt.gqa_attention(q, key_cache, value_cache, mask, is_causal, s')

(``s'`` is ``s``, or SDPA's default ``1 / sqrt(E)``). The C++ kernel reads the caches in place
(no repeat) and skips every position the mask excludes (``core/kernels/gqa_attention.h``). A
key/value that is not the ``repeat_kv`` pattern (already one head per query head, or any
other producer) is passed as it is: the kernel groups heads only when ``H_q > H_kv``. The
``repeat_kv`` nodes, then unused, are removed.

Numerics are SDPA's (``attention_ops``); the TensorRT engine does not run this pass (TensorRT
has its own attention layer).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch

from executorch_trt.graph.edit import EDGE
from executorch_trt.graph.operator_support import schema_name
from executorch_trt.ops import gqa_attention as attention_ops

SDPA = "aten::scaled_dot_product_attention"
GQA_ATTENTION = EDGE.executorch_trt.gqa_attention.default


def sdpa_arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The arguments of an ``aten.scaled_dot_product_attention`` call (ATen or edge) by
    schema name, defaults filled in: ``query``, ``key``, ``value``, ``attn_mask``,
    ``dropout_p``, ``is_causal``, ``scale``, ``enable_gqa``."""
    schema = cast(torch._ops.OpOverload, node.target)._schema
    values = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    values.update(zip((a.name for a in schema.arguments), node.args))
    values.update(node.kwargs)
    return values


def sdpa_kernel_rejection(node: torch.fx.Node) -> str | None:
    """Why the ``gqa_attention`` kernel cannot run this SDPA call, or ``None`` if it can:
    dropout, a dtype/rank/shape ``attention_ops.check_arguments`` rejects, or missing shape
    metadata. The partitioner keeps an SDPA whole only when this is ``None``."""
    args = sdpa_arguments(node)
    if args["dropout_p"] != 0.0:
        return f"dropout_p={args['dropout_p']}"
    vals: dict[str, Any] = {}
    for name in ("query", "key", "value", "attn_mask"):
        arg = args[name]
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
        if arg is not None and not isinstance(val, torch.Tensor):
            return f"{name} has no tensor metadata"
        vals[name] = val
    if (
        not args["enable_gqa"]
        and vals["query"].dim() == 4
        and vals["key"].dim() == 4
        and (vals["query"].shape[1] != vals["key"].shape[1])
    ):
        return "query and key head counts differ without enable_gqa"
    return attention_ops.check_arguments(
        vals["query"], vals["key"], vals["value"], vals["attn_mask"], bool(args["is_causal"])
    )


def _unrepeated(node: Any) -> Any:
    """``x`` when ``node`` is ``repeat_kv(x)`` as ``to_edge`` lowers it (module docstring),
    with ``x`` ``[B, H_kv, S, D]``; else ``node``."""
    if not (isinstance(node, torch.fx.Node) and schema_name(node) == "aten::view_copy"):
        return node
    expand = node.args[0]
    if not (isinstance(expand, torch.fx.Node) and schema_name(expand) == "aten::expand_copy"):
        return node
    unsqueeze = expand.args[0]
    if not (
        isinstance(unsqueeze, torch.fx.Node)
        and schema_name(unsqueeze) == "aten::unsqueeze_copy"
        and unsqueeze.args[1] in (2, -3)
    ):
        return node
    source = unsqueeze.args[0]
    shape = tuple(source.meta["val"].shape) if isinstance(source, torch.fx.Node) else ()
    if len(shape) != 4:
        return node
    batch, heads, length, depth = shape
    group = tuple(expand.meta["val"].shape)[2]
    if tuple(expand.meta["val"].shape) != (batch, heads, group, length, depth) or tuple(
        node.meta["val"].shape
    ) != (batch, heads * group, length, depth):
        return node
    return source


def _remove_if_unused(node: Any) -> None:
    """Erases ``node`` and then its producers, as long as nothing else reads them."""
    while (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and not node.users
        and schema_name(node) in ("aten::view_copy", "aten::expand_copy", "aten::unsqueeze_copy")
    ):
        producer = node.args[0]
        node.graph.erase_node(node)
        node = producer


def use_gqa_attention(graph_module: torch.fx.GraphModule) -> int:
    """Rewrites every SDPA call of ``graph_module``'s top-level graph into ``gqa_attention``
    (module docstring), in place. Returns the number rewritten.

    Raises ``ValueError`` naming the node if an SDPA call is one the kernel cannot run
    (``sdpa_kernel_rejection``): the partitioner keeps only calls it can, so this means a
    partition built some other way."""
    rewritten = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or schema_name(node) != SDPA:
            continue
        reason = sdpa_kernel_rejection(node)
        if reason is not None:
            raise ValueError(
                f"portable engine: cannot run {node.name} (scaled_dot_product_attention): {reason}"
            )
        args = sdpa_arguments(node)
        key, value = _unrepeated(args["key"]), _unrepeated(args["value"])
        if (
            key is args["key"]
            or value is args["value"]
            or (key.meta["val"].shape[1] != value.meta["val"].shape[1])
        ):
            key, value = args["key"], args["value"]  # group only both, or neither
        scale = args["scale"]
        if scale is None:
            scale = 1.0 / math.sqrt(args["query"].meta["val"].shape[-1])
        with graph_module.graph.inserting_before(node):
            fused = graph_module.graph.call_function(
                GQA_ATTENTION,
                (
                    args["query"],
                    key,
                    value,
                    args["attn_mask"],
                    bool(args["is_causal"]),
                    float(scale),
                ),
            )
        fused.meta = dict(node.meta)  # same value: shape, dtype, stack trace
        node.replace_all_uses_with(fused)
        graph_module.graph.erase_node(node)
        _remove_if_unused(args["key"])
        _remove_if_unused(args["value"])
        rewritten += 1
    if rewritten:
        graph_module.recompile()
    return rewritten
