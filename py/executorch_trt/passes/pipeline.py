"""The delegate's graph passes, stage by stage: the one place that says what runs when.

A lowering, ``executorch_trt.export`` or ExecuTorch's composable path with this delegate's
pieces (``to_edge_transform_and_lower(programs, partitioner=[TensorRTPartitioner()],
transform_passes=transform_passes(), compile_config=edge_compile_config())`` then
``to_executorch(backend_config())``), runs these stages in this order. Each stage is a
function here; its caller is named with it.

1. ``prepare_aten_program`` (each ATen program, before decomposition; called by
   ``TensorRTPartitioner.transform_for_pre_decomposition``): make ``copy_``'s dtype conversion
   and broadcast explicit, which functionalisation would drop (``copy_conversions``), give a
   Python scalar operand of a 0-d tensor's arithmetic the tensor's dtype, which ``to_edge``
   would widen (``scalar_operands``), record
   cross-attention cache writes under ``torch.cond`` as buffer mutations
   (``cross_attn_cache``), and pin SDPA's result layout when the engine runs SDPA whole
   (``sdpa_layout``).
2. ``edge_transform_passes`` (each edge program, before partitioning; ExecuTorch runs them as
   ``transform_passes``): a dynamic size read inside and outside the delegate is copied for its
   delegated readers (``size_copies``), a buffer assigned another buffer keeps its write
   (``buffer_to_buffer_writes``), all-zero buffers are marked so they are not serialised
   (``initialize_mutable_buffers.MarkZeroBuffersPass``).
3. ExecuTorch partitions with ``TensorRTPartitioner`` and calls ``TensorRTBackend.preprocess`` on
   each partition, which runs ``canonicalise_partition``: buffer writes made functional
   (``functional_copies``), KV writes rewritten into ``executorch_trt::kv_cache_update``
   (``kv_cache_writes``), copies that change nothing dropped (``noop_copies``). The binding
   contract and the alias decision are then read off the result (``backend``).
4. The engine builds its payload. The portable engine runs ``prepare_nested_program`` on the
   partition (attention over the caches in place: ``gqa_attention``; integer remainders with
   PyTorch's sign, which ExecuTorch's kernel gets wrong: ``integer_remainder``; a norm's mean and a
   dynamic value's reshapes in the forms XNNPACK takes: ``mean_as_pooling``,
   ``inferred_reshapes``;
   ``torch.cond`` results copied into bound outputs:
   ``cond_outputs``), lowers it with XNNPACK, fuses the quantized
   embeddings XNNPACK left (``fuse_quantized_embeddings``) and finalises it with
   ``nested_finalise_passes`` and a planner that first plans ``cond`` caches in place
   (``cross_attn_cache.plan_cond_caches_in_place``).
5. ``finalise_passes`` (the top-level program, ``to_executorch(backend_config())``): initial
   values of non-zero mutable buffers are serialised (``initialize_mutable_buffers``), sibling
   ``cond`` results read late are copied (``cond_outputs``); then memory planning with the
   delegate's ``InplaceMemoryPlanningPass`` (``executorch_trt.lowering.memory_planning``), which
   makes each aliased delegate output the buffer it updates and drops its write-back copy.
"""

from __future__ import annotations

from executorch.exir import EdgeCompileConfig
from executorch.exir.pass_base import PassBase
from executorch.exir.pass_manager import PassType
from torch.export import ExportedProgram

from executorch_trt.graph.edit import sync_output_specs
from executorch_trt.graph.operator_support import DelegateOperatorSupport, schema_name
from executorch_trt.passes.buffer_to_buffer_writes import BufferToBufferWritesPass
from executorch_trt.passes.cond_outputs import SiblingCondOutputsPass, copy_cond_outputs
from executorch_trt.passes.copy_conversions import make_copy_conversions_explicit
from executorch_trt.passes.cross_attn_cache import expose_cross_attn_cache_writes
from executorch_trt.passes.functional_copies import FunctionalCopyPass
from executorch_trt.passes.gqa_attention import use_gqa_attention
from executorch_trt.passes.inferred_reshapes import reshapes_as_inferred_views
from executorch_trt.passes.initialize_mutable_buffers import (
    InitializeMutableBuffersPass,
    MarkZeroBuffersPass,
)
from executorch_trt.passes.integer_remainder import integer_remainders_as_pytorch
from executorch_trt.passes.kv_cache_writes import KVCacheUpdatePass
from executorch_trt.passes.mean_as_pooling import mean_as_pooling
from executorch_trt.passes.noop_copies import DropNoOpCopiesPass
from executorch_trt.passes.scalar_operands import scalar_operands_as_tensors
from executorch_trt.passes.sdpa_layout import pin_sdpa_layout
from executorch_trt.passes.size_copies import SizeCopiesPass

#: The schema name an engine lists when it runs ``scaled_dot_product_attention`` whole.
SDPA = "aten::scaled_dot_product_attention"


def prepare_aten_program(ep: ExportedProgram, supported_ops: frozenset[str]) -> None:
    """Stage 1: rewrites ATen program ``ep`` in place for an engine taking ``supported_ops``.
    Idempotent. Raises ``ValueError`` for a cross-attention cache write it cannot record
    (``expose_cross_attn_cache_writes``)."""
    make_copy_conversions_explicit(ep)
    scalar_operands_as_tensors(ep)
    expose_cross_attn_cache_writes(ep)
    if SDPA in supported_ops:
        pin_sdpa_layout(ep)  # prefill SDPA can then stay whole


def edge_compile_config() -> EdgeCompileConfig:
    """The ``compile_config`` for ``to_edge_transform_and_lower`` of programs lowered with
    ``TensorRTPartitioner``: ExecuTorch's defaults without its IR validity check
    (``_check_ir_validity=False``), as ExecuTorch's LLM export (``LLMEdgeManager``) and its
    XNNPACK configs (``get_xnnpack_edge_compile_config``) have it. The portable engine lowers
    its nested program with it too.

    With the check, ExecuTorch runs the whole graph through its verifier after every edge
    pass, each partition's too: about a sixth of the export of a 135M-parameter decoder
    (``benchmarks/README.md``, export time). The program is the same byte for byte with or
    without it. What the check refuses is still refused, later: an operator ExecuTorch has no
    out variant or kernel for when the program is finalised or loaded, an operator the
    delegate's nested program has no kernel for when the partition is built
    (``engines/portable/runtime_kernels.py``)."""
    return EdgeCompileConfig(_check_ir_validity=False)


def edge_transform_passes(supported_ops: frozenset[str]) -> list[PassType]:
    """Stage 2: the ``transform_passes`` for an engine taking ``supported_ops``, in order."""
    return [
        SizeCopiesPass(DelegateOperatorSupport(supported_ops)),
        BufferToBufferWritesPass(),
        MarkZeroBuffersPass(),
    ]


def canonicalise_partition(ep: ExportedProgram) -> None:
    """Stage 3: rewrites partition program ``ep``'s buffer writes in place (its graph module is
    changed), before its bindings and aliases are decided."""
    for pass_ in partition_passes():
        pass_(ep.graph_module)


def partition_passes() -> list[PassBase]:
    """Stage 3's passes, in order (``canonicalise_partition``)."""
    return [FunctionalCopyPass(), KVCacheUpdatePass(), DropNoOpCopiesPass()]


def prepare_nested_program(ep: ExportedProgram, xnnpack: bool) -> None:
    """Stage 4 (portable engine): rewrites partition ``ep`` in place into the nested program's
    graph, after its binding names were taken (``copy_cond_outputs`` needs them); ``xnnpack``:
    the nested program is then lowered with XNNPACK, so norms' means and dynamic reshapes take
    its forms. A node the method returns may be replaced on the way; the
    output specs are renamed after them (``graph.edit.sync_output_specs``)."""
    use_gqa_attention(ep.graph_module)
    integer_remainders_as_pytorch(ep.graph_module)
    if xnnpack:
        mean_as_pooling(ep.graph_module)
        reshapes_as_inferred_views(ep.graph_module)
    sync_output_specs(ep)
    copy_cond_outputs(ep)


def fuse_quantized_embeddings(ep: ExportedProgram) -> ExportedProgram:
    """Stage 4 (portable engine, after the XNNPACK lowering): ExecuTorch's quant fusion, as its
    LLM recipe runs it (``ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)``):
    torchao's weight-only ``dequantize_affine`` feeding ``aten.embedding`` becomes
    ``quantized_decomposed::embedding_byte`` / ``embedding_4bit`` (ExecuTorch's quantized
    kernels), and constants are folded (4-bit tables packed two values a byte). Returns ``ep``
    itself when no ``dequantize_affine`` is left (nothing else is folded then)."""
    if not any(
        n.op == "call_function" and schema_name(n) == "torchao::dequantize_affine"
        for n in ep.graph_module.graph.nodes
    ):
        return ep
    from executorch.exir.passes.quant_fusion_pass import quant_fusion_and_const_prop_pass

    return quant_fusion_and_const_prop_pass(ep)


def nested_finalise_passes() -> list[PassType]:
    """Stage 4's ``to_executorch`` passes of the nested program (after its XNNPACK lowering,
    which may reorder a ``cond``'s results)."""
    return [SiblingCondOutputsPass()]


def finalise_passes(initialize_buffers: bool) -> list[PassType]:
    """Stage 5's ``to_executorch`` passes of the top-level program; ``initialize_buffers``:
    serialise the initial value of each non-zero mutable buffer (``et_init_buffer``)."""
    passes: list[PassType] = [InitializeMutableBuffersPass()] if initialize_buffers else []
    passes.append(SiblingCondOutputsPass())
    return passes
