"""Operator groups, by schema name (``"aten::mm"``; overloads are not distinguished), covering
what a decoder block lowers to under ``to_edge``.

A vocabulary, not a claim: each engine composes its own ``SUPPORTED_OPS`` from the groups it
implements (``engines/portable/operators.py``, ``engines/tensorrt/operators.py``), and the
partitioner asks the selected engine.
"""

from __future__ import annotations

from collections.abc import Iterable


def _aten(names: Iterable[str]) -> frozenset[str]:
    return frozenset(f"aten::{n}" for n in names)


LINEAR = _aten({"mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "convolution"})
NORMS = _aten(
    {
        "native_layer_norm",
        "layer_norm",
        "rms_norm",
        "_fused_rms_norm",
        "native_group_norm",
        "_native_batch_norm_legit_no_training",
    }
)
ACTIVATIONS = _aten(
    {
        "relu",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "hardtanh",
        "leaky_relu",
        "elu",
        "softplus",
        "glu",
        "hardswish",
        "hardsigmoid",
    }
)
#: Softmax and attention (``scaled_dot_product_attention`` and its decomposition).
ATTENTION = _aten(
    {
        "_softmax",
        "softmax",
        "_log_softmax",
        "log_softmax",
        "scaled_dot_product_attention",
        "_safe_softmax",
    }
)
#: Shape ops, copies, embeddings and gathers.
SHAPE = _aten(
    {
        "view_copy",
        "view",
        "_unsafe_view",
        "reshape",
        "permute_copy",
        "permute",
        "transpose_copy",
        "t_copy",
        "squeeze_copy",
        "unsqueeze_copy",
        "expand_copy",
        "slice_copy",
        "select_copy",
        "cat",
        "split_with_sizes_copy",
        "split_copy",
        "clone",
        "_to_copy",
        "copy",
        "alias_copy",
        "unbind_copy",
        "repeat",
        "stack",
        "flatten",
        "embedding",
        "index_select",
        "gather",
        "index",
        "pad",
        "constant_pad_nd",
    }
)
#: Comparisons, logic and tensor factories (attention masks).
MASKS = _aten(
    {
        "where",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "logical_not",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "masked_fill",
        "triu",
        "tril",
        "full",
        "full_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "arange",
        "scalar_tensor",
        "any",
        "all",
        "isinf",
        "isnan",
    }
)
ARITHMETIC = _aten(
    {
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "pow",
        "sqrt",
        "rsqrt",
        "exp",
        "log",
        "abs",
        "cos",
        "sin",
        "mean",
        "sum",
        "amax",
        "amin",
        "max",
        "min",
        "maximum",
        "minimum",
        "clamp",
        "reciprocal",
        "remainder",
        "floor",
        "ceil",
        "round",
        "erf",
        "sign",
        "cumsum",
        "argmax",
        "argmin",
        "var",
        "rsub",
        "floor_divide",
        "fmod",
        "atan2",
        "_to_dim_order_copy",
    }
)
#: ExecuTorch's dim-order copies (what ``to_edge`` makes of ``_to_copy``/``clone``).
DIM_ORDER = frozenset({"dim_order_ops::_to_dim_order_copy", "dim_order_ops::_clone_dim_order"})
#: KV-cache writes as they reach a partition, and what ``KVCacheUpdatePass`` rewrites them into.
KV_WRITES = _aten({"index_put", "index_copy", "slice_scatter", "select_scatter", "index_fill"}) | {
    "executorch_trt::kv_cache_update"
}

#: ExecuTorch's ``torch.cond`` cross-attention cache ops (``cross_attn_ops``), and ``torch.cond``
#: itself (``torch.ops.higher_order.cond`` has no schema; ``operator_support.COND`` names it).
CROSS_ATTN_CACHE = frozenset({"executorch::alias", "executorch::update_cross_attn_cache"})
CONTROL_FLOW = frozenset({"higher_order::cond"})

#: torchao's affine quantization ops, as ``quantize_`` with
#: ``Int8DynamicActivationIntxWeightConfig`` (8da4w, 8da8w) leaves them around each linear: the
#: weight's ``dequantize_affine`` and the activation's ``choose_qparams_affine`` ->
#: ``quantize_affine`` -> ``dequantize_affine``. An engine that takes them must run each such
#: pattern as one quantized linear.
QUANTIZED = frozenset(
    {"torchao::choose_qparams_affine", "torchao::quantize_affine", "torchao::dequantize_affine"}
)

#: Sizes of dynamic dimensions: ``aten.sym_size.int`` and Python arithmetic on its
#: result (``operator.mul`` etc., named ``operator::<name>``; ``operator_support.op_name``),
#: as ``view(b, t, ...)`` with ``t`` a ``torch.export.Dim`` exports. ExecuTorch emits them as
#: ``executorch_prim`` ops the nested program evaluates at run time.
SYMBOLIC = frozenset(
    {
        "aten::sym_size",
        "aten::sym_numel",
        "operator::add",
        "operator::sub",
        "operator::mul",
        "operator::floordiv",
        "operator::mod",
        "operator::neg",
    }
)

#: Every group: what a decoder block needs end to end.
DECODER = (
    LINEAR
    | NORMS
    | ACTIVATIONS
    | ATTENTION
    | SHAPE
    | MASKS
    | ARITHMETIC
    | DIM_ORDER
    | KV_WRITES
    | SYMBOLIC
)
