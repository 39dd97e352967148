"""``TensorRTPartitioner``: tags the supported parts of an edge program for the delegate.

Rules (``docs/contract.md`` 1, "Ownership"):

* Operators are the selected engine's (``Engine.supported_ops``), under the rules every engine
  shares (``operator_support.DelegateOperatorSupport``), grouped by
  ``CapabilityBasedPartitioner``.
* Weights and constants used only inside a partition are tagged with ``tag_constant_data``
  (they move into the delegate). ``tag_constant_data`` skips buffers that are
  ``BUFFER_MUTATION`` targets, and this partitioner never tags them either: a mutated buffer
  (KV cache, step counter, recurrent state) stays above the delegate as ExecuTorch state and
  reaches the delegate as an argument. ``partition`` asserts that on its own result.
* By default no *module* buffer is tagged, mutated here or not: the partitioner sees one
  method at a time, and a buffer that this method only reads may be state another method of
  the same program mutates (e.g. a cache read-back method next to ``decode``). Freezing it into
  this method's delegate would silently detach it from the shared state. ExecuTorch's own
  lifted scalar constants (buffers whose target starts with ``_lifted_tensor_constant``) are
  constants and are tagged. ``freeze_buffers=True`` restores ExecuTorch's default (unmutated
  buffers move into the delegate) for single-method programs; a program in which it froze a
  buffer another method updates is refused when emitted (``buffer_sharing.check_frozen_buffers``).
* Each partition's compile specs list its *shared inputs*: values it consumes that something
  outside the partition also reads. ``preprocess`` never aliases those (an in-place update
  would change what the other reader sees); their KV writes are copied back instead.
* A method that mutates one of its *user inputs* (a cache passed as ``forward(cache, ...)`` and
  updated in place) is rejected (``graph_mutations.mutated_user_input_error``): ExecuTorch would
  return the new value as an extra output and leave the caller's tensor unchanged. The cache
  must be a module buffer.
* A method that updates a buffer named like one of its inputs (``self.x.add_(x)``) is rejected
  (``graph_mutations.buffer_named_like_input_error``): ExecuTorch 1.5.1 would write the update
  into the input and the buffer would never change.
* A method that updates a buffer in place inside a ``torch.cond`` branch is rejected
  (``graph_mutations.cond_branch_write_error``), before ``to_edge`` fails on it ("not
  functional"): the new value must be returned and written after the cond.
* A method that updates an ``nn.Parameter`` in place is rejected
  (``graph_mutations.mutated_parameter_error``): a parameter is a constant of the program, so its
  update would not persist (ExecuTorch returns it as an extra output); state must be a buffer.
* An edge program in which a buffer's new value differs from the buffer in dtype or shape is
  rejected (``graph_mutations.mismatched_buffer_mutation_error``): functionalisation dropped a
  whole-buffer ``copy_``'s conversion, which ``transform_for_pre_decomposition`` makes explicit
  on the paths that call it (``passes/copy_conversions.py``); ``to_edge`` + ``to_backend`` does
  not; nor does it keep a 0-d buffer's arithmetic with a Python scalar in the buffer's dtype
  (``passes/scalar_operands.py``).
* A ``torch.cond`` is taken whole when the engine takes it and everything in its branches
  (``operator_support``): its branch ``get_attr`` nodes get its tag. For each cross-attention
  cache it updates, ``expose_cross_attn_cache_writes`` made the ``cond``'s output for that
  cache the BUFFER_MUTATION (``passes/cross_attn_cache.py``), so the delegate returns the
  update as an output that ``preprocess`` aliases to the cache input. The cache may be read
  only inside that partition (``ValueError`` otherwise: an in-place update would change what
  the outside reader sees, and a copy-back cannot be correct under ``cond``).
* A program whose ``cond`` updates a cache that is not a recorded buffer mutation
  (``expose_cross_attn_cache_writes`` was not applied) is rejected: the cache would be taken
  as a constant and the update lost.
* Every value crossing a partition's boundary must have a static shape; a dynamic one (a tensor
  with a symbolic dimension, or a symbolic int such as ``sym_size``) is rejected naming the
  method input it comes from (``dynamic_shapes.check_partition_boundary``).
* Before decomposition (``transform_for_pre_decomposition``, which ExecuTorch's
  ``to_edge_transform_and_lower`` calls on each ATen program, method by method, before it
  partitions any): cross-attention cache writes are recorded as buffer mutations
  (``expose_cross_attn_cache_writes``), SDPA's result layout is pinned when the engine runs
  SDPA whole (``pin_sdpa_layout``), and a method is refused (``ValueError``) for a dynamic
  shape the delegate cannot bind, a mutated user input, or a buffer that two methods of the
  lowering would share without being one model's state (``buffer_sharing``).
* ``ops_to_not_decompose`` keeps ``aten.index_copy`` and ``aten.select_scatter`` intact through
  edge lowering so KV writes reach ``preprocess`` in a recognisable form (by default
  ``select_scatter`` becomes a ``where`` over an ``arange`` mask, which reads and rewrites the
  whole cache), ``aten.linear`` when the engine takes it (else every call transposes every
  weight) and ``aten.scaled_dot_product_attention`` the portable engine's attention
  kernel can run (else attention copies and reads the whole cache every step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from executorch.exir.graph_module import get_control_flow_submodules
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

from executorch_trt.engines import get_engine
from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.graph.dynamic_shapes import (
    check_dynamic_shapes,
    check_partition_boundary,
    declared_ranges,
    finite_ranges,
)
from executorch_trt.graph.mutations import (
    buffers_written_in_cond_branches,
    check_supported_mutations,
    cond_branch_write_error,
    mismatched_buffer_mutation_error,
    mismatched_buffer_mutations,
)
from executorch_trt.graph.operator_support import DelegateOperatorSupport, is_cond, op_name
from executorch_trt.graph.provenance import shorten_provenance
from executorch_trt.lowering.buffer_sharing import (
    check_buffer_sharing,
    check_unshared_readers,
    unshared_reason,
)
from executorch_trt.options import ExportOptions, check_bool
from executorch_trt.passes.cross_attn_cache import check_cache_writes_exposed, cond_cache_outputs
from executorch_trt.passes.gqa_attention import sdpa_kernel_rejection
from executorch_trt.passes.pipeline import prepare_aten_program
from executorch_trt.passes.sdpa_layout import is_layout_pinned

SDPA_OP = torch.ops.aten.scaled_dot_product_attention.default

LIFTED_CONSTANT_PREFIX = "_lifted_tensor_constant"


def mutated_buffer_placeholders(ep: ExportedProgram) -> list[torch.fx.Node]:
    """Placeholders of buffers that are ``BUFFER_MUTATION`` targets of ``ep``."""
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    return [
        n
        for n in ep.graph.nodes
        if n.op == "placeholder" and sig.inputs_to_buffers.get(n.name) in mutated
    ]


def module_buffer_placeholders(ep: ExportedProgram) -> list[torch.fx.Node]:
    """Placeholders of the module's buffers (not ExecuTorch's lifted scalar constants)."""
    buffers = ep.graph_signature.inputs_to_buffers
    return [
        n
        for n in ep.graph.nodes
        if n.op == "placeholder"
        and n.name in buffers
        and not buffers[n.name].startswith(LIFTED_CONSTANT_PREFIX)
    ]


def buffer_updates(ep: ExportedProgram, tag: str) -> tuple[tuple[str, str], ...]:
    """``(output node, buffer placeholder)`` name pairs of partition ``tag``: each output node
    inside the partition that is the method's ``BUFFER_MUTATION`` of a buffer whose placeholder
    feeds the same partition (``options.CompileOptions.buffer_updates``)."""
    sig = ep.graph_signature
    placeholder_of = {fqn: name for name, fqn in sig.inputs_to_buffers.items()}
    nodes = {n.name: n for n in ep.graph.nodes}
    pairs = []
    for out_name, fqn in sig.buffers_to_mutate.items():
        out, buf = nodes.get(out_name), nodes.get(placeholder_of.get(fqn, ""))
        if out is None or buf is None or out.meta.get("delegation_tag") != tag:
            continue
        if any(u.meta.get("delegation_tag") == tag for u in buf.users):
            pairs.append((out_name, buf.name))
    return tuple(sorted(pairs))


def shared_inputs(graph: torch.fx.Graph, tag: str) -> tuple[str, ...]:
    """Names of nodes outside partition ``tag`` that feed it and are also used outside it.

    The lowered partition names its placeholders after these nodes, so the names identify
    partition inputs in ``preprocess``.
    """
    shared = []
    for node in graph.nodes:
        if node.meta.get("delegation_tag") == tag:
            continue
        users = list(node.users)
        if any(u.meta.get("delegation_tag") == tag for u in users) and any(
            u.meta.get("delegation_tag") != tag for u in users
        ):
            shared.append(node.name)
    return tuple(shared)


class TensorRTPartitioner(Partitioner):
    """Partitions an edge program for ``TensorRTBackend``.

    Args:
        engine: ``"portable"`` or ``"tensorrt"`` (``ExportOptions``); the partitions hold only
            operators this engine takes.
        kv_cache: ``"inplace"`` or ``"copy_back"`` (``ExportOptions``).
        freeze_buffers: tag buffers that this method does not mutate into the delegate.
        require_inplace: ``preprocess`` raises instead of warning when an in-place update
            still copies a view of its buffer inside the engine (``ExportOptions``).
        portable_xnnpack: the portable engine nests XNNPACK delegates (``ExportOptions``).
        external_weights: named-data weights go to an external ``.ptd`` (``ExportOptions``).
        method_names: the method names in the order the programs are given to
            ``to_edge_transform_and_lower`` (a dict keeps its order); used in messages only.

    Raises ``TypeError``/``ValueError`` for bad options, as ``ExportOptions`` does; from
    ``transform_for_pre_decomposition``, ``ValueError`` for a program that mutates a user
    input, has a dynamic shape the delegate cannot bind, or shares a buffer with another
    method of the lowering that is not the same model's state; from ``partition``,
    ``ValueError`` for a program that mutates a user input or passes a dynamic size into a
    partition (each names the input or buffer and says what to do); ``AssertionError``
    (internal) if a mutated buffer would end up inside a partition.
    """

    def __init__(
        self,
        engine: str = "portable",
        kv_cache: str = "inplace",
        freeze_buffers: bool = False,
        require_inplace: bool = False,
        portable_xnnpack: bool = True,
        external_weights: bool = False,
        method_names: Sequence[str] | None = None,
    ) -> None:
        check_bool("TensorRTPartitioner: freeze_buffers", freeze_buffers)
        self._init(
            ExportOptions(
                engine=engine,
                kv_cache=kv_cache,
                require_inplace=require_inplace,
                portable_xnnpack=portable_xnnpack,
                external_weights=external_weights,
            ),
            freeze_buffers,
            method_names,
        )

    @classmethod
    def from_options(
        cls,
        options: ExportOptions,
        freeze_buffers: bool = False,
        method_names: Sequence[str] | None = None,
    ) -> TensorRTPartitioner:
        """A partitioner for options already validated (``executorch_trt.export``'s)."""
        partitioner = cls.__new__(cls)
        partitioner._init(options, freeze_buffers, method_names)
        return partitioner

    def _init(
        self, options: ExportOptions, freeze_buffers: bool, method_names: Sequence[str] | None
    ) -> None:
        super().__init__()
        self.options = options
        self.freeze_buffers = freeze_buffers
        self.method_names = list(method_names or [])
        self.operator_support = DelegateOperatorSupport(get_engine(options.engine).supported_ops)
        # The current lowering's ATen programs by method label (buffer-sharing check) and their
        # declared dynamic ranges by symbol (None: two methods disagree). ExecuTorch transforms
        # every method before it partitions any, so a transform after a partition, or after a
        # refusal, starts the next lowering.
        self._lowering: dict[str, ExportedProgram] = {}
        self._declared: dict[str, tuple[int, int] | None] = {}
        self._partitioned = False

    def _method_label(self, index: int) -> str:
        if index < len(self.method_names):
            return self.method_names[index]
        return "forward" if index == 0 and not self.method_names else f"method #{index + 1}"

    def transform_for_pre_decomposition(self, exported_program: ExportedProgram) -> ExportedProgram:
        """Prepares ATen program ``exported_program`` in place and returns it (module
        docstring, "Before decomposition"). Raises ``ValueError`` naming the method (by
        ``method_names``), the input or buffer, and what to do."""
        if self._partitioned:
            self._start_lowering()
        try:
            return self._prepare(exported_program)
        except Exception:
            self._start_lowering()
            raise

    def _start_lowering(self) -> None:
        self._lowering, self._declared, self._partitioned = {}, {}, False

    def _prepare(self, exported_program: ExportedProgram) -> ExportedProgram:
        method = self._method_label(len(self._lowering))
        in_branches = buffers_written_in_cond_branches(exported_program)
        if in_branches:
            raise cond_branch_write_error(in_branches, method)
        prepare_aten_program(exported_program, self.operator_support.supported_ops)
        check_dynamic_shapes(exported_program, method)
        check_supported_mutations(exported_program, method)
        self._lowering[method] = exported_program
        if self.options.shares_mutable_buffers and len(self._lowering) > 1:
            check_buffer_sharing(
                self._lowering, share_by_name=self.options.share_mutable_buffers is True
            )
        elif len(self._lowering) > 1:
            check_unshared_readers(
                self._lowering, unshared_reason(self.options.alloc_mutable_buffers)
            )
        for symbol, bounds in finite_ranges(exported_program.range_constraints).items():
            seen = self._declared.setdefault(symbol, bounds)
            if seen != bounds:
                self._declared[symbol] = None
        return exported_program

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        self._partitioned = True
        check_supported_mutations(exported_program)
        mismatched = mismatched_buffer_mutations(exported_program)
        if mismatched:
            raise mismatched_buffer_mutation_error(mismatched, prepared=bool(self._lowering))
        check_cache_writes_exposed(
            exported_program.graph_module, exported_program.graph_signature, "TensorRTPartitioner"
        )
        partitions = CapabilityBasedPartitioner(
            exported_program.graph_module,
            self.operator_support,
            allows_single_node_partition=True,
        ).propose_partitions()
        tags = {}
        for partition in partitions:
            tag = f"tensorrt_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
        tag_constant_data(exported_program)
        # What follows (the partition's copy, to_backend, to_executorch) re-traces and copies
        # every node's provenance chain; ExecuTorch reads only its root.
        shorten_provenance(exported_program.graph_module)
        if not self.freeze_buffers:
            for node in module_buffer_placeholders(exported_program):
                node.meta.pop("delegation_tag", None)
        _take_conds_whole(exported_program)
        for node in mutated_buffer_placeholders(exported_program):
            assert "delegation_tag" not in node.meta, (
                f"mutated buffer {node.name} was tagged into a delegate; it must stay above it"
            )
        for tag in sorted(
            {
                n.meta["delegation_tag"]
                for n in exported_program.graph.nodes
                if "delegation_tag" in n.meta
            }
        ):
            check_partition_boundary(
                exported_program,
                [n for n in exported_program.graph.nodes if n.meta.get("delegation_tag") == tag],
            )
            # The user's declared ranges: the edge program's own start at 2 (dynamic_shapes).
            recorded = {k: v for k, v in self._declared.items() if v is not None}
            ranges = declared_ranges(exported_program, recorded)
            options = self.options.compile_options(
                shared_inputs=shared_inputs(exported_program.graph, tag),
                buffer_updates=buffer_updates(exported_program, tag),
                symbol_ranges=[(name, lo, hi) for name, (lo, hi) in sorted(ranges.items())],
            )
            tags[tag] = DelegationSpec(BACKEND_ID, options.to_compile_specs())
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[torch.fx.Node], bool] | None]:
        """Keeps the KV-write ops ``aten.index_copy.default`` (else decomposed into
        ``index_put``), ``aten.select_scatter.default`` (else decomposed into a ``where``
        over the whole cache) and ``aten.index_fill`` (else decomposed into an ``index_copy``
        that, unlike ``index_fill``, rejects negative indices) intact; ``KVCacheUpdatePass``
        recognises all three.

        Also keeps ``aten.linear.default`` (``docs/executorch_notes.md``, "Linear"): ``to_edge``
        would decompose it into ``permute_copy(weight)`` + ``mm``, and nothing folds the transpose,
        so every call would transpose every weight (75% of a decode step in an ETDump profile).
        Whole, it runs as ``linear.out`` (optimized kernels) or as one XNNPACK fully-connected op
        (``engines/portable/builder.py``). Only when the selected engine takes ``aten::linear``, and
        only at the top level (the filter below: a linear in a ``torch.cond`` branch is decomposed,
        since the ``cond`` may stay outside the delegate). ExecuTorch checks after partitioning that
        every kept node was delegated and raises ``RuntimeError`` ("... was not decomposed or
        delegated") otherwise: a top-level linear the partitioner leaves out (an output dtype the
        blob cannot describe) fails the export rather than running on the host.

        And keeps ``aten.scaled_dot_product_attention.default``, top level only,
        when the ``gqa_attention`` kernel can run it (float32, no dropout:
        ``passes.gqa_attention.sdpa_kernel_rejection``) and its exported result is contiguous
        (e.g. one query row, as in decode) or pinned (``passes.sdpa_layout``; see the filter):
        decomposed, it is a ``repeat_kv`` copy of both caches and matrix products over the whole
        capacity every step; whole, the portable engine runs it as ``executorch_trt::gqa_attention``
        over the caches in place and only at the positions the mask allows
        (``passes.gqa_attention``).

        The filter is returned only when it rejects a node of ``ep``. When it keeps every node
        (the usual case), keeping the ops unconditionally is the same decision, and ExecuTorch
        then decomposes each method once instead of three times (a filter sends it through
        its ``EDGE_DO_NOT_DECOMP`` path, which re-traces the whole program twice more)."""
        keep = [
            torch.ops.aten.index_copy.default,
            torch.ops.aten.select_scatter.default,
            torch.ops.aten.index_fill.int_Scalar,
            torch.ops.aten.index_fill.int_Tensor,
        ]
        whole = [
            op
            for op, name in (
                (torch.ops.aten.linear.default, "aten::linear"),
                (SDPA_OP, "aten::scaled_dot_product_attention"),
            )
            if name in self.operator_support.supported_ops
        ]
        if not whole:
            return keep, None
        top_level = ep.graph_module.graph

        def keep_node(node: torch.fx.Node) -> bool:
            if node.target not in whole:
                return True
            # Inside a torch.cond branch they are decomposed: the cond may stay outside the
            # delegate (an op in a branch the engine does not take), and ExecuTorch rejects a
            # kept op that no partition consumed ("... was not decomposed or delegated").
            if node.graph is not top_level:
                return False
            if node.target is not SDPA_OP:
                return True
            # Kept whole, SDPA is re-traced with a contiguous result, while the export traced
            # the CPU flash kernel's [B, T, H, D]-strided one: a view recorded on that layout
            # (transformers' transpose + reshape) would fail unless the two agree, which they
            # do when T == 1 (decode), when the export's result was contiguous anyway, or when
            # executorch_trt.export pinned the layout (passes.sdpa_layout).
            val = node.meta.get("val")
            return (
                isinstance(val, torch.Tensor)
                and (val.is_contiguous() or is_layout_pinned(node))
                and sdpa_kernel_rejection(node) is None
            )

        if all(keep_node(n) for n in _call_nodes(ep.graph_module, whole)):
            return keep + whole, None
        return keep + whole, keep_node


def _call_nodes(
    graph_module: torch.fx.GraphModule, targets: Sequence[object]
) -> Iterator[torch.fx.Node]:
    """The nodes of ``graph_module`` calling one of ``targets``, control-flow branches
    included."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in targets:
            yield node
    for _, submodule, _ in get_control_flow_submodules(graph_module):
        yield from _call_nodes(submodule, targets)


def _take_conds_whole(ep: ExportedProgram) -> None:
    """Tags the branch ``get_attr`` nodes of every tagged ``cond`` with it, and checks that
    nothing outside the partition reads a cross-attention cache it updates (module
    docstring). Raises ``ValueError`` naming the reader."""
    for cond in [n for n in ep.graph.nodes if is_cond(n) and "delegation_tag" in n.meta]:
        tag = cond.meta["delegation_tag"]
        for branch in cond.args[1:3]:
            branch.meta["delegation_tag"] = tag
        for k in sorted(set(cond_cache_outputs(ep.graph_module, cond).values())):
            cache = cond.args[3][k]
            outside = [u for u in cache.users if u.meta.get("delegation_tag") != tag]
            if outside:
                reader = outside[0]
                what = (
                    "the program output"
                    if reader.op == "output"
                    else (f"{op_name(reader)} ({reader.name})")
                )
                raise ValueError(
                    f"executorch_trt: the cross-attention cache '{cache.name}' that torch.cond "
                    f"'{cond.name}' updates is also read by {what}, which the delegate does not "
                    "take; the delegate updates the cache in place, so that reader could see "
                    "the new value too early. Read the cache only through the cond's output "
                    "(or compute what reads it with operators the engine takes)."
                )
