"""Small helpers for passes that insert edge-dialect nodes into a partition graph.

Every inserted node gets ``meta["val"]`` computed by running its op on the inputs' fake
values (in their ``FakeTensorMode``), so later passes (spec propagation, memory planning of the
nested program) see correct shapes and dtypes without re-tracing.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from executorch.exir.dialects._ops import ops as exir_ops
from torch._guards import detect_fake_mode

EDGE = exir_ops.edge


def _val(arg: Any) -> Any:
    return arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg


def insert_before(anchor: torch.fx.Node, target: Any, args: Sequence[Any],
                  kwargs: dict = None) -> torch.fx.Node:
    """Inserts ``target(*args, **kwargs)`` just before ``anchor``; returns the new node with
    ``meta["val"]`` set. ``args`` may mix nodes and constants."""
    kwargs = dict(kwargs or {})
    with anchor.graph.inserting_before(anchor):
        node = anchor.graph.call_function(target, tuple(args), kwargs)
    vals = [_val(a) for a in pytree.tree_leaves((args, kwargs))]
    fake_mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    fake_args = pytree.tree_map(_val, (tuple(args), kwargs))
    if fake_mode is not None:
        with fake_mode:
            node.meta["val"] = target(*fake_args[0], **fake_args[1])
    else:
        node.meta["val"] = target(*fake_args[0], **fake_args[1])
    return node


def reshape_to(anchor: torch.fx.Node, value: torch.fx.Node,
               shape: Sequence[int]) -> torch.fx.Node:
    """``value`` broadcast to ``shape`` (``view_copy`` to pad its rank with leading 1s, then
    ``expand_copy``), inserted before ``anchor``; ``value`` itself when it already has
    ``shape``. The caller has checked that ``value`` broadcasts to ``shape``."""
    shape = [int(s) for s in shape]
    current = list(value.meta["val"].shape)
    if current == shape:
        return value
    if len(current) < len(shape):
        current = [1] * (len(shape) - len(current)) + current
        value = insert_before(anchor, EDGE.aten.view_copy.default, (value, current))
    if current != shape:
        value = insert_before(anchor, EDGE.aten.expand_copy.default, (value, shape))
    return value


def view_as(anchor: torch.fx.Node, value: torch.fx.Node,
            shape: Sequence[int]) -> torch.fx.Node:
    """``view_copy(value, shape)`` before ``anchor`` (same number of elements), or ``value``
    itself when it already has ``shape``."""
    shape = [int(s) for s in shape]
    if list(value.meta["val"].shape) == shape:
        return value
    return insert_before(anchor, EDGE.aten.view_copy.default, (value, shape))


def cast_to(anchor: torch.fx.Node, value: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """``value`` converted to ``dtype`` (``_to_dim_order_copy``) before ``anchor``, or
    ``value`` itself when it already has ``dtype``."""
    if value.meta["val"].dtype == dtype:
        return value
    rank = value.meta["val"].dim()
    return insert_before(anchor, EDGE.dim_order_ops._to_dim_order_copy.default, (value,),
                         {"dtype": dtype, "dim_order": list(range(rank))})
