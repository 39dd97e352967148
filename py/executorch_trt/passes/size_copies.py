"""Gives each delegated reader of a dynamic size its own copy of that size's computation.

With a ``torch.export.Dim``, ``view(b, t, ...)`` reads ``t = sym_size(x, 1)`` (and arithmetic
on it, ``operator.mul``...). The delegate computes such a size itself from its own input
tensors (``op_groups.SYMBOLIC``); but a size that something outside the delegate also reads
stays outside (``DelegateOperatorSupport``), and would then reach the delegate as a symbolic
int, which no binding can carry (``dynamic_shapes.check_partition_boundary`` rejects it).
Before partitioning (``SizeCopiesPass``, a ``transform_passes`` entry of
``to_edge_transform_and_lower``: ExecuTorch forbids a partitioner to change the graph),
``copy_sizes_for_delegated_readers`` gives every node the delegate takes its own copy of such
a size (the ``sym_size`` and the arithmetic up to the tensors it
is read from), so that copy is taken with its reader and the original serves the rest::

    t = sym_size(x, 1)          # read by view_copy (delegated) and topk (not)
    v = view_copy(y, [1, t, 4]) ; k = topk(z, t)
  ->
    t = sym_size(x, 1)          # read by topk only: stays outside
    t2 = sym_size(x, 1)         # read by view_copy only: taken with it
    v = view_copy(y, [1, t2, 4]) ; k = topk(z, t)

A copy costs one ``executorch_prim`` call per use at run time (no tensor work).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
import torch.utils._pytree as pytree
from executorch.exir.pass_base import PassBase, PassResult

from executorch_trt.graph.operator_support import DelegateOperatorSupport, symbolic_op_name


def _copy_size(
    size: torch.fx.Node, before: torch.fx.Node, copies: dict[torch.fx.Node, torch.fx.Node]
) -> torch.fx.Node:
    """A copy of symbolic node ``size`` and of its symbolic ancestors, inserted before
    ``before``; tensor inputs are shared. ``copies`` maps originals to the copies made for
    this reader."""
    if not symbolic_op_name(size):
        return size
    if size not in copies:
        args, kwargs = pytree.tree_map_only(
            torch.fx.Node, lambda n: _copy_size(n, before, copies), (size.args, size.kwargs)
        )
        with size.graph.inserting_before(before):
            copy = size.graph.call_function(cast(Callable[..., Any], size.target), args, kwargs)
        copy.meta = dict(size.meta)
        copies[size] = copy
    return copies[size]


def copy_sizes_for_delegated_readers(
    graph_module: torch.fx.GraphModule, support: DelegateOperatorSupport
) -> bool:
    """Rewrites ``graph_module``'s top-level graph in place (module docstring): every node
    ``support`` takes that reads a symbolic size ``support`` does not take reads its own copy
    instead. Returns whether anything changed."""
    submodules = dict(graph_module.named_modules())
    changed = False
    for node in list(graph_module.graph.nodes):
        if (
            node.op != "call_function"
            or symbolic_op_name(node)
            or not support.is_node_supported(submodules, node)
        ):
            continue
        for size in node.all_input_nodes:
            if symbolic_op_name(size) and not support.is_node_supported(submodules, size):
                node.replace_input_with(size, _copy_size(size, node, {}))
                changed = True
    if changed:
        graph_module.graph.lint()
        graph_module.recompile()
    return changed


class SizeCopiesPass(PassBase):
    """``copy_sizes_for_delegated_readers`` with ``support`` (the partitioner's
    ``operator_support``), as a pass for ``to_edge_transform_and_lower(...,
    transform_passes=[SizeCopiesPass(partitioner.operator_support)])``;
    ``executorch_trt.export`` runs it."""

    def __init__(self, support: DelegateOperatorSupport) -> None:
        super().__init__()
        self.support = support

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(
            graph_module, copy_sizes_for_delegated_readers(graph_module, self.support)
        )
