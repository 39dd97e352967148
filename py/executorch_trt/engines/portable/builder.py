"""Portable engine builder: the partition as a nested ExecuTorch program.

The partition program (edge dialect, KV writes already rewritten) is finalised with
``to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
alloc_graph_input=False, alloc_graph_output=False)))`` so every input and output of the nested
method ``forward`` is unplanned and bound to the delegate's (caller's) storage at execute time.
A ``torch.cond`` in the partition (a cross-attention cache update) is planned in place first
(``passes.cross_attn_cache.plan_cond_caches_in_place``): its cache output becomes the nested
method's cache input itself, so the update lands in the caller's storage and nothing lives in
the arena all ``cond`` branches share (ExecuTorch #21490).

With ``portable_xnnpack`` (the default, ``CompileOptions``) the nested program is first lowered
with ExecuTorch's ``XnnpackPartitioner``: linears, matmuls, elementwise ops and
softmax run as XNNPACK subgraphs (4x faster than ExecuTorch's portable kernels on the
benchmark's decoder). What writes state in place stays outside XNNPACK, on ExecuTorch's
kernels, so caches are still updated in the caller's storage with no copy:
``executorch_trt::kv_cache_update``, ``executorch::update_cross_attn_cache``/``alias`` and
``torch.cond`` (with everything in its branches; ``_NestedXnnpackPartitioner``). A linear
quantized with torchao (8da4w, 8da8w: ``op_groups.QUANTIZED``) runs as XNNPACK's dynamically
quantized linear (int8 activations, int4/int8 grouped weights); a weight-only quantized
embedding becomes ExecuTorch's ``quantized_decomposed::embedding_byte`` / ``embedding_4bit``
(``passes.pipeline.fuse_quantized_embeddings``; the engine links ExecuTorch's quantized
kernels); any other quantization op is refused, as ExecuTorch has no kernel for it. Attention
runs on the delegate library's ``executorch_trt::gqa_attention`` kernel
(``passes.gqa_attention``), which reads the caches in place and only where the mask allows.
The outer partitioner's ``delegation_tag`` metadata is removed first: ``to_backend`` would
otherwise see each node in two partitions ("found node ... in partition tensorrt_1 and
partition tag0").
The nested program keeps no data of its own: its XNNPACK weights and its other constants
(emitted as external constants, ``external_constants=True``) go to the outer program's named
data store, stored once per program (``shared_data.py``).
XNNPACK packs its weights at load, per nested method (the peak RSS of a program grows by about
the weights' size). The runtime must register ``XnnpackBackend`` (``//core/engine:
portable_engine`` links the wheel's backend library; the Python runtime loads the same one).

The payload descriptor lists the engine's binding names in nested-method order
(``payload.py``); which outputs alias which inputs is the blob metadata's alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from executorch.exir import ExecutorchBackendConfig
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from executorch.exir.graph_module import get_control_flow_submodules
from executorch.exir.pass_base import PassResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.program._program import EdgeProgramManager
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature

from executorch_trt.engines import op_groups
from executorch_trt.engines.base import EnginePayload
from executorch_trt.engines.portable.runtime_kernels import check_kernels
from executorch_trt.engines.portable.shared_data import split_nested_program
from executorch_trt.format.blob import AliasedIO
from executorch_trt.format.portable_payload import PortableDescriptor, write_portable_payload
from executorch_trt.format.wire import EXTERNAL_WEIGHTS_TAG
from executorch_trt.graph.operator_support import is_cond, schema_name
from executorch_trt.graph.provenance import shorten_provenance
from executorch_trt.options import CompileOptions
from executorch_trt.passes.cross_attn_cache import plan_cond_caches_in_place
from executorch_trt.passes.pipeline import (
    edge_compile_config,
    fuse_quantized_embeddings,
    nested_finalise_passes,
    prepare_nested_program,
)

METHOD_NAME = "forward"

#: Ops that write state in place, kept out of XNNPACK (module docstring); ``torch.cond`` too.
STATE_WRITERS = frozenset(
    {"executorch_trt::kv_cache_update", "executorch::update_cross_attn_cache", "executorch::alias"}
)


class _NestedPlanningPass(MemoryPlanningPass):
    """ExecuTorch's planner, after binding ``cond`` cache outputs to their cache operands."""

    def run(
        self,
        graph_module: torch.fx.GraphModule,
        graph_signature: ExportGraphSignature | None = None,
    ) -> PassResult:
        plan_cond_caches_in_place(graph_module)
        return super().run(graph_module, graph_signature)


def _strip_delegation_tags(graph_module: torch.fx.GraphModule) -> None:
    """Removes the outer partitioner's ``delegation_tag`` from every node, control-flow
    branches included."""
    for node in graph_module.graph.nodes:
        node.meta.pop("delegation_tag", None)
    for _, submodule, _ in get_control_flow_submodules(graph_module):
        _strip_delegation_tags(submodule)


class _NestedXnnpackPartitioner(Partitioner):
    """ExecuTorch's ``XnnpackPartitioner`` on the nested program's top-level graph, minus the
    state writers (``STATE_WRITERS``, ``torch.cond``) and whatever lies in a ``cond`` branch.
    XNNPACK takes none of these today; removing their tags keeps it so if its tables grow.
    Its configs refuse what XNNPACK would compute otherwise than PyTorch
    (``xnnpack_configs.restricted_configs``).
    Copies whose removal would break their XNNPACK subgraph stay out too
    (``_untag_copies_xnnpack_cannot_remove``)."""

    def __init__(self) -> None:
        super().__init__()
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        from executorch_trt.engines.portable.xnnpack_configs import restricted_configs

        self._xnnpack = XnnpackPartitioner(configs=restricted_configs())

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        result = self._xnnpack.partition(exported_program)
        graph_module = result.tagged_exported_program.graph_module
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and (is_cond(node) or schema_name(node) in STATE_WRITERS):
                node.meta.pop("delegation_tag", None)
        for _, submodule, _ in get_control_flow_submodules(graph_module):
            _strip_delegation_tags(submodule)
        _untag_copies_xnnpack_cannot_remove(graph_module)
        used = {
            n.meta["delegation_tag"] for n in graph_module.graph.nodes if "delegation_tag" in n.meta
        }
        tags = {t: s for t, s in result.partition_tags.items() if t in used}
        return PartitionResult(
            tagged_exported_program=result.tagged_exported_program, partition_tags=tags
        )


#: Copies XNNPACK's preprocess removes from its subgraph (ExecuTorch's
#: ``RemoveCloneOpsTransform``): each one's result becomes its operand.
_REMOVED_COPIES = frozenset({"aten::clone", "dim_order_ops::_clone_dim_order"})
#: Conversions it removes too when they keep the dtype and the dim order (its
#: ``RemoveRedundantCopyPass``; e.g. a buffer overwritten by ``fill_`` with a tensor).
_REMOVED_CONVERSIONS = frozenset({"aten::_to_copy", "dim_order_ops::_to_dim_order_copy"})


def _removed_by_xnnpack(node: torch.fx.Node) -> bool:
    """Whether XNNPACK's preprocess replaces ``node``, a copy it took, by its operand."""
    name = schema_name(node)
    if name in _REMOVED_COPIES:
        return True
    if name not in _REMOVED_CONVERSIONS or not isinstance(node.args[0], torch.fx.Node):
        return False
    out, src = node.meta.get("val"), node.args[0].meta.get("val")
    return (
        isinstance(out, torch.Tensor)
        and isinstance(src, torch.Tensor)
        and out.dtype == src.dtype
        and out.dim_order() == src.dim_order()
    )


def _untag_copies_xnnpack_cannot_remove(graph_module: torch.fx.GraphModule) -> None:
    """Untags each copy XNNPACK removes (``_removed_by_xnnpack``) whose result leaves its
    XNNPACK subgraph while its operand enters the subgraph or leaves it too (a buffer updated,
    then returned as a copy: ``cache.add_(x); return cache.clone()``; a buffer overwritten with
    a value XNNPACK does not compute: ``total.fill_(x.sum())``). With the copy removed, the
    subgraph would
    return one value twice or return its own input, which XNNPACK's preprocess refuses
    ("Output node ... is already in the inputs", ExecuTorch 1.5.1 with its own
    ``XnnpackPartitioner`` too). Such a copy runs on ExecuTorch's kernel instead."""

    def leaves(node: torch.fx.Node, tag: object) -> bool:
        return any(user.meta.get("delegation_tag") != tag for user in node.users)

    changed = True
    while changed:  # an untagged copy can make its operand's copy one of these
        changed = False
        for node in graph_module.graph.nodes:
            tag = node.meta.get("delegation_tag")
            if tag is None or node.op != "call_function" or not _removed_by_xnnpack(node):
                continue
            operand = node.args[0]
            if not isinstance(operand, torch.fx.Node) or not leaves(node, tag):
                continue
            if (
                operand.meta.get("delegation_tag") != tag
                or operand.op == "placeholder"
                or leaves(operand, tag)
            ):
                del node.meta["delegation_tag"]
                changed = True


def _check_quantized_ops_taken(ep: ExportedProgram) -> None:
    """Raises ``ValueError`` naming the first quantization op (``op_groups.QUANTIZED``) that
    neither XNNPACK took nor the embedding fusion replaced: ExecuTorch has no kernel for it, so
    the nested program could not run it (``to_executorch`` would stop at "Missing out
    variants")."""
    for node in ep.graph_module.graph.nodes:
        if node.op == "call_function" and schema_name(node) in op_groups.QUANTIZED:
            stack = node.meta.get("nn_module_stack") or {}
            where = next(reversed(stack.values()))[0] if stack else node.name
            raise ValueError(
                f"portable engine: {schema_name(node)} at {where!r} is not part of a quantized "
                "linear XNNPACK runs, and ExecuTorch has no kernel for it. The portable engine "
                "runs torchao's Int8DynamicActivationIntxWeightConfig (8da4w, 8da8w) on "
                "nn.Linear layers whose in_features the group size divides, and "
                "IntxWeightOnlyConfig (int8, int4) on nn.Embedding tables only; weight-only "
                "linears are not supported: quantize with executorch_trt.llm.quantize or "
                "export the float model"
            )


def build(
    ep: ExportedProgram, aliases: Sequence[AliasedIO], options: CompileOptions | None = None
) -> EnginePayload:
    """Lowers ``ep`` to a nested ``.pte`` and wraps it in a portable payload.

    Args:
        ep: the partition program, edge dialect, no mutation outputs. Its nodes lose their
            ``delegation_tag`` metadata.
        aliases: the alias decision for this partition (``backend.aliases.decide_aliases``). Not
            needed to build: the nested program's ``kv_cache_update.out`` writes in place
            whenever the binding plan gives an output its input's storage, as the blob's
            ``aliased_io`` says.
        options: the partition's ``CompileOptions``; ``portable_xnnpack`` (default ``True``)
            lowers the nested program with XNNPACK (module docstring).

    Returns the payload (``docs/formats/portable_payload.md``) and the nested program's data, moved
    out of it (``shared_data.split_nested_program``). Raises ``ValueError`` if the nested method's
    input/output names or counts disagree with ``ep``'s signature, if a quantization op is
    left that XNNPACK did not take and no embedding fusion replaced
    (``_check_quantized_ops_taken``), or if the nested program calls an operator the runtime
    has no kernel for (``runtime_kernels.check_kernels``).
    """
    del aliases  # the blob metadata carries them (module docstring)
    xnnpack = True if options is None else options.portable_xnnpack
    input_names = list(ep.graph_signature.user_inputs)
    output_names = list(ep.graph_signature.user_outputs)
    prepare_nested_program(ep, xnnpack)  # after the binding names are taken
    _strip_delegation_tags(ep.graph_module)
    shorten_provenance(ep.graph_module)  # each nested re-trace copies the whole chain
    manager = EdgeProgramManager({METHOD_NAME: ep}, compile_config=edge_compile_config())
    if xnnpack:
        manager = manager.to_backend(_NestedXnnpackPartitioner())
    lowered = manager.exported_program(METHOD_NAME)
    fused = fuse_quantized_embeddings(lowered)
    if fused is not lowered:
        manager = EdgeProgramManager({METHOD_NAME: fused}, compile_config=edge_compile_config())
    _check_quantized_ops_taken(fused)
    config = ExecutorchBackendConfig(
        passes=nested_finalise_passes(),
        memory_planning_pass=_NestedPlanningPass(alloc_graph_input=False, alloc_graph_output=False),
        external_constants=True,
    )
    et = manager.to_executorch(config)
    check_kernels(et, fused)
    nested_sig = et.exported_program(METHOD_NAME).graph_signature
    if list(nested_sig.user_inputs) != input_names:
        raise ValueError(
            f"portable engine: nested inputs {list(nested_sig.user_inputs)} != partition inputs "
            f"{input_names}"
        )
    plan = et.executorch_program.execution_plan[0]
    if len(plan.inputs) != len(input_names) or len(plan.outputs) != len(output_names):
        raise ValueError(
            f"portable engine: nested method has {len(plan.inputs)} inputs/{len(plan.outputs)} "
            f"outputs, partition has {len(input_names)}/{len(output_names)}"
        )
    # to_executorch keeps the output order (the partition has no mutation outputs), so the
    # engine's output binding j is the partition's output j.
    external = options is not None and options.external_weights
    parts = split_nested_program(et, config, EXTERNAL_WEIGHTS_TAG if external else None)
    descriptor = PortableDescriptor(
        inputs=tuple(input_names),
        outputs=tuple(output_names),
        constants=tuple(sorted(parts.constants.items())),
    )
    return EnginePayload(
        payload=write_portable_payload(descriptor, parts.pte), named_data=parts.named_data
    )
