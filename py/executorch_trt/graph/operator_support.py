"""Which nodes of an edge program the delegate takes: the selected engine's operators, under
the rules every engine shares.

The operator table is the engine's (``Engine.supported_ops``: ``engines/portable/operators.py``,
``engines/tensorrt/operators.py``); this module adds what does not depend on the engine: the
outputs must be tensors of a dtype the blob can describe (``wire.DTYPES``), a ``getitem``
stays with its producer, and a ``torch.cond`` is taken whole (predicate operand, both branch
subgraphs) or not at all.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, cast

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

from executorch_trt.format.wire import dtype_name
from executorch_trt.graph.nodes import arg_node, attr_name

#: The name engines list ``torch.ops.higher_order.cond`` under (it has no schema).
COND = "higher_order::cond"


def is_cond(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls ``torch.ops.higher_order.cond``."""
    return node.op == "call_function" and node.target is torch.ops.higher_order.cond


def cond_branches(
    graph_module: torch.fx.GraphModule, cond: torch.fx.Node
) -> list[torch.fx.GraphModule]:
    """The true and false branch subgraphs of ``cond`` (its ``get_attr`` arguments 1 and 2)."""
    return [getattr(graph_module, attr_name(arg_node(cond, i))) for i in (1, 2)]


def schema_name(node: torch.fx.Node) -> str:
    """``"aten::mm"`` for a call to ``aten.mm.default`` (edge or ATen), ``""`` otherwise."""
    schema = getattr(node.target, "_schema", None)
    return schema.name if schema is not None else ""


def symbolic_op_name(node: torch.fx.Node) -> str:
    """``"aten::sym_size"`` or ``"operator::mul"`` for a node computing a symbolic int (a
    dynamic dimension's size, or arithmetic on one), ``""`` for anything else."""
    if node.op != "call_function" or not isinstance(node.meta.get("val"), torch.SymInt):
        return ""
    if getattr(node.target, "__module__", None) == "_operator":
        return f"operator::{cast(Any, node.target).__name__}"
    return schema_name(node)


def op_name(node: torch.fx.Node) -> str:
    """``schema_name(node)``, or the target's text for a node without a schema (for
    messages)."""
    return schema_name(node) or str(node.target)


def _has_supported_tensor_outputs(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return all(isinstance(v, torch.Tensor) and dtype_name(v.dtype) is not None for v in vals)


#: ``node.meta`` key of a node a pass placed for the host program (e.g. the snapshot of a
#: buffer another buffer is assigned: ``passes/buffer_to_buffer_writes.py``); never delegated.
STAYS_ON_HOST = "executorch_trt_stays_on_host"


class DelegateOperatorSupport(OperatorSupportBase):
    """Accepts a ``call_function`` node whose schema name is in ``supported_ops`` (the selected
    engine's) and whose outputs are tensors of a dtype the blob can describe
    (docs/formats/delegate_blob.md "dtypes"), and an ``operator.getitem`` of such a node.

    ``getitem`` has no schema; without the second rule every multi-output op
    (``native_layer_norm``, ``split_with_sizes_copy``, ``unbind_copy``) would end a partition,
    because the unsupported ``getitem`` between the op and its consumers blocks the merge
    (``CapabilityBasedPartitioner`` only re-homes getitems *after* merging). XNNPACK's
    partitioner keeps getitems with their producer the same way.

    A ``torch.cond`` is accepted when ``COND`` is in ``supported_ops`` and every node of both
    branches is (a placeholder, the output, or a call this rule accepts, nested ``cond``
    included): the partition then holds the whole control flow and the engine runs it
    (``TensorRTPartitioner`` tags the branch ``get_attr`` nodes with it)."""

    def __init__(self, supported_ops: frozenset[str]) -> None:
        self.supported_ops = supported_ops

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        if node.op != "call_function" or STAYS_ON_HOST in node.meta:
            return False
        if is_cond(node):
            branches = _branch_modules(submodules, node)
            return (
                COND in self.supported_ops
                and branches is not None
                and _has_supported_tensor_outputs(node)
                and all(self._graph_supported(dict(b.named_modules()), b.graph) for b in branches)
            )
        symbolic = symbolic_op_name(node)
        if symbolic:
            # A size the partition computes from its own tensors (op_groups.SYMBOLIC), taken
            # only when everything reading it is taken too: a size leaving the partition would
            # be a symbolic-int delegate output, which no binding can carry. A size read inside
            # and outside is copied for the readers inside first (passes/size_copies.py).
            return symbolic in self.supported_ops and all(
                self.is_node_supported(submodules, user) for user in node.users
            )
        if node.target is operator.getitem:
            producer = node.args[0]
            return (
                isinstance(producer, torch.fx.Node)
                and self.is_node_supported(submodules, producer)
                and isinstance(node.meta.get("val"), torch.Tensor)
            )
        return schema_name(node) in self.supported_ops and _has_supported_tensor_outputs(node)

    def _graph_supported(
        self, submodules: Mapping[str, torch.nn.Module], graph: torch.fx.Graph
    ) -> bool:
        """Every node of a branch graph is taken (``get_attr`` only as a nested branch)."""
        for n in graph.nodes:
            if n.op in ("placeholder", "output"):
                continue
            if n.op == "get_attr" and all(is_cond(u) for u in n.users):
                continue
            if not self.is_node_supported(submodules, n):
                return False
        return True


def _branch_modules(
    submodules: Mapping[str, torch.nn.Module], cond: torch.fx.Node
) -> list[torch.fx.GraphModule] | None:
    """``cond``'s two branch graph modules, or ``None`` if either is not one."""
    branches = [submodules.get(cast(str, getattr(b, "target", None))) for b in cond.args[1:3]]
    modules = [b for b in branches if isinstance(b, torch.fx.GraphModule)]
    return modules if len(modules) == len(branches) else None
