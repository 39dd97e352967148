"""ExecuTorch's XNNPACK partitioner configs, restricted to the nodes XNNPACK computes as PyTorch
does: the portable engine's nested ``XnnpackPartitioner`` takes these configs
(``builder._NestedXnnpackPartitioner``), so anything else stays on ExecuTorch's kernels and the
XNNPACK subgraphs are cut around it.

Each restriction is a case where ExecuTorch 1.5.1's XNNPACK delegate (plain ExecuTorch with
its own ``XnnpackPartitioner`` too) returns other numbers than PyTorch, with no error:

* ``gelu(approximate="tanh")`` (GPT-2's ``gelu_new``) runs as the exact erf GELU: XNNPACK's
  GELU has no tanh form and the node visitor drops the argument (errors of about 4e-4);
* ``maximum`` / ``minimum`` return the other operand where one is NaN (PyTorch propagates the
  NaN), so a running maximum loses its NaN;
* a tensor of more than ``XNN_MAX_TENSOR_DIMS`` (6) dimensions exports, then fails to load
  (``xnn_status_unsupported_parameter``).

XNNPACK's float32 ``sqrt``, ``rsqrt``, ``exp``, ``sigmoid``, ``silu``, ``softplus`` and ``glu``
also differ from PyTorch at non-finite or extreme inputs (``sqrt(inf)`` and ``sigmoid(1e30)`` are
NaN, ``exp(nan)`` is 0); they stay in XNNPACK, since every decoder layer runs them
(``docs/guide/cpu_performance.md``, "Numerics"; ``portable_xnnpack=False`` avoids them).
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
from executorch.backends.xnnpack.partition.config.xnnpack_config import XNNPartitionerConfig
from executorch.backends.xnnpack.utils.xnnpack_constants import XNN_MAX_TENSOR_DIMS
from torch.export import ExportedProgram

from executorch_trt.graph.operator_support import schema_name

#: Ops XNNPACK computes otherwise than PyTorch where an operand is NaN.
_NAN_DROPPING = frozenset({"aten::maximum", "aten::minimum"})


def _gelu_approximation(node: torch.fx.Node) -> Any:
    if len(node.args) > 1:
        return node.args[1]
    return node.kwargs.get("approximate", "none")


def _tensors(node: torch.fx.Node) -> list[torch.Tensor]:
    vals = [a.meta.get("val") for a in node.all_input_nodes] + [node.meta.get("val")]
    flat = [v for val in vals for v in (val if isinstance(val, (list, tuple)) else [val])]
    return [v for v in flat if isinstance(v, torch.Tensor)]


def computes_as_pytorch(node: torch.fx.Node) -> bool:
    """Whether XNNPACK computes ``node`` as PyTorch does (module docstring)."""
    name = schema_name(node)
    if name == "aten::gelu" and _gelu_approximation(node) != "none":
        return False  # XNNPACK's GELU is the exact (erf) one
    return name not in _NAN_DROPPING and all(t.dim() <= XNN_MAX_TENSOR_DIMS for t in _tensors(node))


def _restricted(config: type[XNNPartitionerConfig]) -> type[XNNPartitionerConfig]:
    def check_constraints(
        self: XNNPartitionerConfig, node: torch.fx.Node, ep: ExportedProgram
    ) -> bool:
        return computes_as_pytorch(node) and config.check_constraints(self, node, ep)

    return type(config.__name__, (config,), {"check_constraints": check_constraints})


def restricted_configs() -> list[type[XNNPartitionerConfig]]:
    """``ALL_PARTITIONER_CONFIGS`` (what ``XnnpackPartitioner()`` uses), each refusing a node
    ``computes_as_pytorch`` rejects."""
    return [_restricted(config) for config in ALL_PARTITIONER_CONFIGS]
