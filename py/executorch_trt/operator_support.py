"""Which edge-dialect operators the TensorRT delegate takes.

A table of ATen schema names (``"aten::mm"``; overloads are not distinguished) covering what a
decoder block lowers to under ``to_edge``: linear algebra, norms, activations, softmax and
attention (``scaled_dot_product_attention`` and its decomposition), embeddings, shape ops,
masks, elementwise arithmetic, and KV-cache writes (``index_put`` / ``index_copy`` /
``slice_scatter`` / ``executorch_trt::kv_cache_update``).

Both engines implement every op listed: TensorRT through its converters, the portable engine
through ExecuTorch's portable kernels plus ``executorch_trt::kv_cache_update.out``.
"""

from __future__ import annotations

import operator
from typing import FrozenSet, Mapping

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

_LINEAR = {"mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "convolution"}
_NORMS = {"native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm",
          "native_group_norm", "_native_batch_norm_legit_no_training"}
_ACTIVATIONS = {"relu", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "leaky_relu", "elu",
                "softplus", "glu", "hardswish", "hardsigmoid"}
_ATTENTION = {"_softmax", "softmax", "_log_softmax", "log_softmax",
              "scaled_dot_product_attention", "_safe_softmax"}
_SHAPE = {"view_copy", "view", "_unsafe_view", "reshape", "permute_copy", "permute",
          "transpose_copy", "t_copy", "squeeze_copy", "unsqueeze_copy", "expand_copy",
          "slice_copy", "select_copy", "cat", "split_with_sizes_copy", "split_copy", "clone",
          "_to_copy", "copy", "alias_copy", "unbind_copy", "repeat", "stack", "flatten",
          "embedding", "index_select", "gather", "index", "pad", "constant_pad_nd"}
_MASKS = {"where", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
          "logical_not", "bitwise_and", "bitwise_or", "bitwise_not", "masked_fill", "triu",
          "tril", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "arange",
          "scalar_tensor", "any", "all", "isinf", "isnan"}
_ARITHMETIC = {"add", "sub", "mul", "div", "neg", "pow", "sqrt", "rsqrt", "exp", "log", "abs",
               "cos", "sin", "mean", "sum", "amax", "amin", "max", "min", "maximum", "minimum",
               "clamp", "reciprocal", "remainder", "floor", "ceil", "round", "erf", "sign",
               "cumsum", "argmax", "argmin", "var", "rsub", "floor_divide", "fmod", "atan2",
               "_to_dim_order_copy"}
_KV_WRITES = {"index_put", "index_copy", "slice_scatter", "select_scatter", "index_fill"}

#: Schema names (``namespace::name``) the delegate accepts.
SUPPORTED_OPS: FrozenSet[str] = frozenset(
    [f"aten::{n}" for n in
     _LINEAR | _NORMS | _ACTIVATIONS | _ATTENTION | _SHAPE | _MASKS | _ARITHMETIC | _KV_WRITES]
    + ["dim_order_ops::_to_dim_order_copy", "dim_order_ops::_clone_dim_order",
       "executorch_trt::kv_cache_update"]
)

_SUPPORTED_DTYPES = {torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                     torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool}


def schema_name(node: torch.fx.Node) -> str:
    """``"aten::mm"`` for a call to ``aten.mm.default`` (edge or ATen), ``""`` otherwise."""
    schema = getattr(node.target, "_schema", None)
    return schema.name if schema is not None else ""


def _has_supported_tensor_outputs(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return all(isinstance(v, torch.Tensor) and v.dtype in _SUPPORTED_DTYPES for v in vals)


class TensorRTOperatorSupport(OperatorSupportBase):
    """Accepts a ``call_function`` node whose schema name is in ``SUPPORTED_OPS`` and whose
    outputs are tensors of a dtype the blob can describe (FORMAT.md "dtypes"), and an
    ``operator.getitem`` of such a node.

    ``getitem`` has no schema; without the second rule every multi-output op
    (``native_layer_norm``, ``split_with_sizes_copy``, ``unbind_copy``) would end a partition,
    because the unsupported ``getitem`` between the op and its consumers blocks the merge
    (``CapabilityBasedPartitioner`` only re-homes getitems *after* merging). XNNPACK's
    partitioner keeps getitems with their producer the same way."""

    def __init__(self, supported_ops: FrozenSet[str] = SUPPORTED_OPS) -> None:
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
