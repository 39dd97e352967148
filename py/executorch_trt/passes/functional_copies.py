"""``FunctionalCopyPass``: drops the false dependency of a functional ``copy`` on its target.

Functionalization turns ``target.copy_(src)`` (and every assignment into a view, such as
``cache[:, :, 3:4] = v`` or the HF static cache's ``cumulative_length.copy_(pos[0])``) into
``aten.copy(target, src)``, whose result is ``src`` converted to ``target``'s dtype and
broadcast to its shape: ``target``'s *values* are never read. The dependency still counts as a
read of ``target``, which would keep a buffer from being updated in place (an in-place write is
only safe when nothing else reads the old value). Graph shape rewritten (inside one
partition)::

    out = aten.copy(target, src)
  ->
    out = expand_copy(_to_dim_order_copy(src, dtype=target.dtype), target.shape)

and, for the same reason, a constant of a partition input's shape no longer reads the input
(``cache.zero_()``, ``cache.fill_(v)``)::

    out = aten.full_like(target, v)      # or zeros_like / ones_like
  ->
    out = aten.full(target.shape, v, dtype=target.dtype)

For ``copy``, with the cast and the expand each omitted when not needed (``out`` becomes ``src``
itself when neither is). A copy that is a partition output keeps its node (its name is the output's
binding name, which the program's signature and the partitioner's ``buffer_updates`` refer to): the
node itself becomes the last op, a plain ``_to_dim_order_copy`` when nothing else is needed. Then
dead nodes (e.g. the ``slice_copy`` that only fed the copy its shape) are removed.
"""

from __future__ import annotations

import torch
from executorch.exir.pass_base import PassBase, PassResult

from executorch_trt.graph.edit import (
    EDGE,
    cast_to,
    is_static,
    reshape_to,
    same_shape,
    shape_argument,
)
from executorch_trt.graph.operator_support import schema_name


class FunctionalCopyPass(PassBase):
    """Applies the rewrite in the module docstring to a partition's graph module in place."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            if node.op == "call_function" and schema_name(node) in _FILL_LIKE:
                modified |= _fill_without_reading(node)
                continue
            if node.op != "call_function" or schema_name(node) != "aten::copy":
                continue
            target, src = node.args[0], node.args[1]
            t, s = (
                target.meta.get("val"),
                src.meta.get("val") if isinstance(src, torch.fx.Node) else None,
            )
            if not isinstance(t, torch.Tensor) or not isinstance(s, torch.Tensor):
                continue
            if any(u.op == "output" for u in node.users):
                _rewrite_in_place(node, src, t)
            else:
                node.replace_all_uses_with(reshape_to(node, cast_to(node, src, t.dtype), t.shape))
                graph_module.graph.erase_node(node)
            modified = True
        if modified:
            graph_module.graph.eliminate_dead_code()
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)


def _rewrite_in_place(node: torch.fx.Node, src: torch.fx.Node, target: torch.Tensor) -> None:
    """Turns ``node`` (``copy(target, src)``) into the op that produces its value from ``src``
    alone, keeping the node (and its name)."""
    s = src.meta["val"]
    if not same_shape(s.shape, target.shape):
        value = cast_to(node, src, target.dtype)
        if value.meta["val"].dim() < target.dim():
            padded = [1] * (target.dim() - value.meta["val"].dim()) + list(value.meta["val"].shape)
            value = reshape_to(node, value, padded)
        have = value.meta["val"].shape
        if any(not is_static(d) and not same_shape([h], [d]) for h, d in zip(have, target.shape)):
            raise ValueError(
                f"copy_ of a {[str(h) for h in have]} value into a dynamic "
                f"{[str(d) for d in target.shape]} target is not supported"
            )
        node.target = EDGE.aten.expand_copy.default
        node.args, node.kwargs = (value, shape_argument(target.shape, "copy_")), {}
    else:
        node.target = EDGE.dim_order_ops._to_dim_order_copy.default
        node.args = (src,)
        node.kwargs = {"dtype": target.dtype, "dim_order": list(range(target.dim()))}


#: ``*_like`` ops whose result depends only on the input's shape and dtype, with the fill
#: value's position in their arguments (``None``: the value is implied).
_FILL_LIKE = {"aten::full_like": 1, "aten::zeros_like": None, "aten::ones_like": None}
_IMPLIED_FILL = {"aten::zeros_like": 0, "aten::ones_like": 1}


def _fill_without_reading(node: torch.fx.Node) -> bool:
    """Turns ``full_like(x, v)`` (or ``zeros_like``/``ones_like``) of a partition input ``x``
    into ``full(x.shape, v, dtype=...)``, keeping the node; returns whether it did."""
    name = schema_name(node)
    source, val = node.args[0], node.meta.get("val")
    if (
        not isinstance(source, torch.fx.Node)
        or source.op != "placeholder"
        or not isinstance(val, torch.Tensor)
    ):
        return False
    position = _FILL_LIKE[name]
    fill = node.args[position] if position is not None else _IMPLIED_FILL[name]
    node.target = EDGE.aten.full.default
    node.args = (shape_argument(val.shape, schema_name(node)), fill)
    node.kwargs = {"dtype": val.dtype}
    return True
