"""Which nodes of an edge program the delegate takes: the selected engine's operators, under
the rules every engine shares.

The operator table is the engine's (``Engine.supported_ops``: ``engines/portable/operators.py``,
``engines/tensorrt/operators.py``); this module adds what does not depend on the engine: the
outputs must be tensors of a dtype the blob can describe (``wire.DTYPES``), and a ``getitem``
stays with its producer.
"""

from __future__ import annotations

import operator
from typing import FrozenSet, Mapping

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

from executorch_trt.wire import dtype_name


def schema_name(node: torch.fx.Node) -> str:
    """``"aten::mm"`` for a call to ``aten.mm.default`` (edge or ATen), ``""`` otherwise."""
    schema = getattr(node.target, "_schema", None)
    return schema.name if schema is not None else ""


def op_name(node: torch.fx.Node) -> str:
    """``schema_name(node)``, or the target's text for a node without a schema (for
    messages)."""
    return schema_name(node) or str(node.target)


def _has_supported_tensor_outputs(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return all(isinstance(v, torch.Tensor) and dtype_name(v.dtype) is not None for v in vals)


class DelegateOperatorSupport(OperatorSupportBase):
    """Accepts a ``call_function`` node whose schema name is in ``supported_ops`` (the selected
    engine's) and whose outputs are tensors of a dtype the blob can describe (FORMAT.md
    "dtypes"), and an ``operator.getitem`` of such a node.

    ``getitem`` has no schema; without the second rule every multi-output op
    (``native_layer_norm``, ``split_with_sizes_copy``, ``unbind_copy``) would end a partition,
    because the unsupported ``getitem`` between the op and its consumers blocks the merge
    (``CapabilityBasedPartitioner`` only re-homes getitems *after* merging). XNNPACK's
    partitioner keeps getitems with their producer the same way."""

    def __init__(self, supported_ops: FrozenSet[str]) -> None:
        self.supported_ops = supported_ops

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            producer = node.args[0]
            return (isinstance(producer, torch.fx.Node)
                    and self.is_node_supported(submodules, producer)
                    and isinstance(node.meta.get("val"), torch.Tensor))
        return schema_name(node) in self.supported_ops and _has_supported_tensor_outputs(node)
