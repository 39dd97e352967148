"""Typed views of a ``torch.fx`` node's arguments, for the passes that read them.

``torch.fx`` types ``Node.args`` as a tuple of ``Argument`` (a union of some twenty types:
nodes, numbers, slices, dtypes, containers, ...) and ``Node.target`` as a callable or a string.
A pass knows from the operator's schema which argument is a node and which an int; these
helpers state it once for the type checker (``typing.cast``) and do nothing at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch


def value_layout(node: torch.fx.Node) -> tuple[torch.dtype, tuple[int, ...]] | None:
    """``(dtype, shape)`` of ``node``'s tensor value (``meta["val"]``), or None when it has no
    tensor value or a symbolic size."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(isinstance(n, int) for n in val.shape):
        return None
    return val.dtype, tuple(int(n) for n in val.shape)


def same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` have the same shape, size by size; symbolic sizes are compared as
    written (no guard is added), so an equality the shape environment has not proven counts as
    different."""
    return a.dim() == b.dim() and all(str(x) == str(y) for x, y in zip(a.shape, b.shape))


def layout_text(dtype: torch.dtype, shape: Sequence[Any]) -> str:
    """``"float16 [3, 4]"``: a dtype and shape as messages print them."""
    return f"{str(dtype).removeprefix('torch.')} {list(shape)}"


#: ``node.meta`` keys that say where a node came from in the user's model.
PROVENANCE_KEYS = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node")


def copy_provenance(source: torch.fx.Node, *new: torch.fx.Node) -> None:
    """Gives the nodes ``new`` that a pass inserts for ``source`` its provenance, so errors and
    profiles point at the user's code."""
    for key in PROVENANCE_KEYS:
        if key in source.meta:
            for node in new:
                node.meta[key] = source.meta[key]


def arg_node(node: torch.fx.Node, i: int) -> torch.fx.Node:
    """``node.args[i]``, a node by the operator's schema (e.g. the tensor an op reads)."""
    return cast(torch.fx.Node, node.args[i])


def arg_int(node: torch.fx.Node, i: int) -> int:
    """``node.args[i]``, an int by the operator's schema (e.g. a dimension or an index)."""
    return cast(int, node.args[i])


def attr_name(node: torch.fx.Node) -> str:
    """The attribute of the graph module a ``get_attr`` node reads (its target)."""
    return cast(str, node.target)


def args_of(node: torch.fx.Node) -> tuple[Any, ...]:
    """``node.args`` with each argument typed ``Any``, for a pass that destructures an op's
    arguments by its schema and checks each one (``isinstance``, ``meta["val"]``) before use."""
    return node.args


def arg_nodes(node: torch.fx.Node, i: int) -> Sequence[torch.fx.Node]:
    """``node.args[i]``, a list of nodes by the operator's schema (e.g. a ``cond``'s operands)."""
    return cast(Sequence[torch.fx.Node], node.args[i])
