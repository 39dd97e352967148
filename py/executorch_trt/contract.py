"""The binding contract of one partition: ordered bindings and the in-place alias decision.

Order (DESIGN.md contract 3): the runtime binds ``execute()`` argument ``i`` to
``inputs[i]`` and argument ``len(inputs) + j`` to ``outputs[j]``. ExecuTorch passes a delegate
its inputs in the fused partition's placeholder order (first use inside the partition, not the
method's input order) and its outputs in the partition's output order. Both orders are read
from the partition program and *asserted* against its graph: ``binding_contract`` raises
``ValueError`` if ``graph_signature.user_inputs``/``user_outputs`` disagree with the graph's
placeholders/outputs, or if the partition carries a mutation output (which
``arrange_graph_outputs`` would move ahead of the user outputs).

Aliasing (DESIGN.md contract 2): ``decide_aliases`` is the single place that decides which
outputs update an input in place; the decision is carried in the blob and never re-derived.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from typing import Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from executorch_trt.blob import AliasedIO, Binding, Dimension, SymbolRange
from executorch_trt.operator_support import is_cond, op_name, schema_name
from executorch_trt.passes.cross_attn_cache import cond_cache_outputs
from executorch_trt.options import KV_CACHE_INPLACE, CompileOptions
from executorch_trt.passes.kv_cache_update_pass import (KV_CACHE_UPDATE, VIEW_COPY_BYTES,
                                                        match_kv_write)
from executorch_trt.dynamic_shapes import (SYMBOLIC_KINDS, WHAT_TO_DO, describe_symbols,
                                           finite_ranges, shape_text, symbols_of)
from executorch_trt.wire import (ALIAS_KV_CACHE_UPDATE, ALIAS_USER, MAX_DIMENSION, OWNERSHIP_CALLER,
                                 dtype_name)


@dataclasses.dataclass(frozen=True)
class BindingContract:
    """Bindings in delegate argument order, plus the output/input nodes they came from."""

    inputs: Tuple[Binding, ...]
    outputs: Tuple[Binding, ...]
    input_nodes: Tuple[torch.fx.Node, ...]
    output_nodes: Tuple[torch.fx.Node, ...]
    #: The dynamic dimensions the bindings name (blob format version 2), in first-use order.
    symbols: Tuple[SymbolRange, ...] = ()


def _contiguous(val: torch.Tensor) -> bool:
    """Whether ``val`` is laid out in the default dim order (symbolic sizes count as yes: the
    dynamic-shape check reports those)."""
    try:
        return bool(val.is_contiguous())
    except Exception:  # noqa: BLE001 - unbacked symbolic strides
        return True


def _dimension(size, name: str, dim: int, node: torch.fx.Node,
               symbols: Dict[str, SymbolRange], ranges: Dict[str, Tuple[int, int]]) -> Dimension:
    """Dimension ``dim`` of binding ``name``: ``size`` itself when static; for a symbolic size
    that is a single symbol (a ``torch.export.Dim``), the symbol's name, recording its range in
    ``symbols``: ``[min, max]`` from ``ranges`` (the method's ``range_constraints``,
    ``CompileOptions.symbol_ranges``), else from the shape environment
    (``ShapeEnv.var_to_range``), and ``opt`` the example input's size
    (``ShapeEnv.var_to_val``), as Torch-TensorRT derives an optimization profile from the
    example inputs. Raises ``ValueError`` for an expression of symbols (``2*s0``,
    ``s0 + 1``: the blob names sizes, not formulas) and for a dynamic size without a finite
    upper bound (ExecuTorch plans memory at the upper bound)."""
    if isinstance(size, int):
        return size
    expr = size.node.expr
    where = (f"TensorRTBackend: binding '{name}' dimension {dim} "
             f"(shape {shape_text(node.meta['val'].shape)})")
    if not expr.is_Symbol:
        raise ValueError(
            f"{where} is the expression {expr} of dynamic sizes; a delegate binding's dynamic "
            "dimension must be a dynamic size itself (a torch.export.Dim). Compute the "
            "expression outside the delegate, or make the input's size its own Dim.")
    shape_env = size.node.shape_env
    if str(expr) not in ranges and expr in shape_env.var_to_range:
        ranges = finite_ranges({expr: shape_env.var_to_range[expr]})
    lower, upper = ranges.get(str(expr), (0, None))
    if upper is None or upper > MAX_DIMENSION:
        raise ValueError(
            f"{where} is the dynamic size {expr} with no finite upper bound below 2^31; "
            "ExecuTorch plans memory at the upper bound, so give it one: "
            "torch.export.Dim(name, min=..., max=...)")
    examples = getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val
    example = examples.get(expr)
    opt = min(max(int(example), lower), upper) if example is not None else upper
    symbols.setdefault(str(expr), SymbolRange(str(expr), lower, upper, opt))
    return str(expr)


def _binding(name: str, node: torch.fx.Node, symbols: Dict[str, SymbolRange],
             ranges: Dict[str, Tuple[int, int]]) -> Binding:
    """The ``Binding`` of partition input/output ``node``; a dynamic dimension becomes its
    symbol's name with the range recorded in ``symbols`` (``_dimension``). Raises
    ``ValueError`` for a value that is not a tensor, an unsupported dtype, a non-contiguous
    layout, a symbolic int/float/bool passed into the delegate (e.g. the ``sym_size`` of
    ``self.cache[:N, pos] = k`` with ``N`` a ``torch.export.Dim``; ``executorch_trt.export``
    and ``TensorRTPartitioner`` reject these earlier, naming the method input), and for a
    dynamic dimension ``_dimension`` cannot express."""
    val = node.meta.get("val")
    if isinstance(val, tuple(SYMBOLIC_KINDS)):
        raise ValueError(
            f"TensorRTBackend: binding '{name}' is a symbolic {SYMBOLIC_KINDS[type(val)]} "
            f"({describe_symbols(symbols_of(val), node.graph)}), i.e. a dynamic size "
            f"passed into the delegate. {WHAT_TO_DO}"
        )
    if not isinstance(val, torch.Tensor):
        raise ValueError(
            f"TensorRTBackend: binding '{name}' is not a tensor ({type(val).__name__})"
        )
    dtype = dtype_name(val.dtype)
    if dtype is None:
        raise ValueError(f"TensorRTBackend: binding '{name}' has unsupported dtype {val.dtype}")
    if not _contiguous(val):
        raise ValueError(
            f"TensorRTBackend: binding '{name}' is not contiguous (strides {list(val.stride())} "
            f"for shape {list(val.shape)}, e.g. a channels_last buffer); the delegate binds "
            "tensors in the default (contiguous) dim order only. Make it contiguous before "
            "export, e.g. register_buffer(name, tensor.contiguous()).")
    shape = tuple(_dimension(d, name, dim, node, symbols, ranges)
                  for dim, d in enumerate(val.shape))
    return Binding(name, dtype, shape)


def binding_contract(ep: ExportedProgram,
                     symbol_ranges: Sequence[Tuple[str, int, int]] = ()) -> BindingContract:
    """Builds the ordered bindings of partition program ``ep``; ``symbol_ranges``
    (``CompileOptions.symbol_ranges``, keyed by the shape environment's symbol, ``"s58"``)
    gives each dynamic size's range. A dynamic size is named in the contract (and the blob) by
    its ``torch.export.Dim`` name when it has one unique within the partition
    (``_user_symbol_names``), else by its symbol.

    Inputs: ``ep.graph_signature.user_inputs`` (names = placeholder names). Outputs:
    ``ep.graph_signature.user_outputs`` (names = output node names). Raises ``ValueError`` if
    either order disagrees with the graph, or if ``ep`` has a non-user output.
    """
    sig = ep.graph_signature
    non_user = [s for s in sig.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if non_user:
        raise ValueError(
            "TensorRTBackend: partition has mutation outputs "
            f"{[s.arg.name for s in non_user]}; mutated buffers must stay above the delegate "
            "(TensorRTPartitioner never tags them)"
        )
    user_inputs = set(sig.user_inputs)
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    if [n.name for n in placeholders] != list(sig.user_inputs):
        raise ValueError(
            "TensorRTBackend: delegate input order mismatch: graph placeholders "
            f"{[n.name for n in placeholders]} vs graph_signature.user_inputs "
            f"{list(sig.user_inputs)}"
        )
    output_nodes = list(ep.graph.output_node().args[0])
    if [getattr(n, "name", None) for n in output_nodes] != list(sig.user_outputs):
        raise ValueError(
            "TensorRTBackend: delegate output order mismatch: graph outputs "
            f"{[getattr(n, 'name', n) for n in output_nodes]} vs graph_signature.user_outputs "
            f"{list(sig.user_outputs)}"
        )
    symbols: Dict[str, SymbolRange] = {}
    ranges = {name: (lo, hi) for name, lo, hi in symbol_ranges}
    inputs = tuple(_binding(n.name, n, symbols, ranges) for n in placeholders)
    given = set(symbols)
    outputs = tuple(_binding(n.name, n, symbols, ranges) for n in output_nodes)
    for b in outputs:
        for dim, d in enumerate(b.shape):
            if isinstance(d, str) and d not in given:
                raise ValueError(
                    f"TensorRTBackend: output '{b.name}' dimension {dim} is the dynamic size "
                    f"{d}, which is no input's dimension (a data-dependent size); the delegate "
                    "must know every output size from its inputs. Keep the op that produces it "
                    "out of the delegate.")
    names = _user_symbol_names(list(placeholders) + list(output_nodes), symbols)
    return BindingContract(inputs=_renamed(inputs, names), outputs=_renamed(outputs, names),
                           input_nodes=tuple(placeholders), output_nodes=tuple(output_nodes),
                           symbols=tuple(dataclasses.replace(s, name=names[key])
                                         for key, s in symbols.items()))


def _dim_name(size) -> Optional[str]:
    """The name the user gave dynamic size ``size`` (a ``SymInt`` that is one symbol), e.g.
    ``"T"`` for ``torch.export.Dim("T", ...)``, from its shape environment: the symbol's
    sources (``var_to_sources``, e.g. ``L['tokens'].size()[1]``) and the names the export
    gave them (``source_name_to_debug_name``). ``None`` when no source has one (a
    ``Dim.AUTO``/``Dim.DYNAMIC`` size, a shape environment without them)."""
    shape_env = getattr(size.node, "shape_env", None)
    debug_names = getattr(shape_env, "source_name_to_debug_name", None) or {}
    for source in (getattr(shape_env, "var_to_sources", None) or {}).get(size.node.expr, ()):
        source_name = source.name() if callable(source.name) else source.name
        if debug_names.get(source_name):
            return debug_names[source_name]
    return None


def _user_symbol_names(nodes: Sequence[torch.fx.Node],
                       symbols: Dict[str, SymbolRange]) -> Dict[str, str]:
    """``{symbol key (str(expr)): the name the blob records}``: the user's ``Dim`` name
    (``_dim_name``) where there is one and no other symbol of the blob would record the same
    name, else the shape environment's own (``"s58"``). The runtime's messages name a dynamic
    size by what the blob records, and ``Dim("T")`` is what the user wrote; the names of one
    blob must stay unique (FORMAT.md)."""
    preferred: Dict[str, str] = {}
    for node in nodes:
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()):
            if isinstance(size, torch.SymInt) and str(size.node.expr) in symbols:
                key = str(size.node.expr)
                if key not in preferred:
                    name = _dim_name(size)
                    if name:
                        preferred[key] = name
    chosen = {key: preferred.get(key, key) for key in symbols}
    while True:
        counts = collections.Counter(chosen.values())
        clashes = [key for key, name in chosen.items() if counts[name] > 1 and name != key]
        if not clashes:
            return chosen
        for key in clashes:  # each round returns at least one symbol to its own, unique, key
            chosen[key] = key


def _renamed(bindings: Tuple[Binding, ...], names: Dict[str, str]) -> Tuple[Binding, ...]:
    return tuple(dataclasses.replace(b, shape=tuple(names.get(d, d) if isinstance(d, str) else d
                                                    for d in b.shape))
                 for b in bindings)


@dataclasses.dataclass(frozen=True)
class AliasDecision:
    """Which buffer updates of one partition are in place, and why the others are not.

    * ``aliases``: the ``AliasedIO`` entries for the blob, in output order.
    * ``not_in_place``: ``{output name: reason}`` for every buffer update (a
      ``CompileOptions.buffer_updates`` output) that is *not* aliased; ExecuTorch copies those
      back. The reasons are for people (export warnings, ``inspect``), not for the runtime.
    """

    aliases: Tuple[AliasedIO, ...]
    not_in_place: Dict[str, str]
    #: ``{output name: bytes}`` for aliased updates that write back a *view* of their buffer
    #: (``KVCacheUpdatePass.VIEW_COPY_BYTES``): in place at the program level, but the engine
    #: copies that view out and back on every call.
    view_copies: Dict[str, int] = dataclasses.field(default_factory=dict)


def _memory_readers(node: torch.fx.Node) -> List[torch.fx.Node]:
    """Nodes that read ``node``'s memory: its users, and through ``view_copy`` (which
    ExecuTorch turns into a view of the same memory) the users of those views."""
    readers, stack = [], list(node.users)
    while stack:
        user = stack.pop()
        readers.append(user)
        if user.op == "call_function" and schema_name(user) == "aten::view_copy":
            stack.extend(user.users)
    return readers


def _ancestors(node: torch.fx.Node) -> Set[torch.fx.Node]:
    seen, stack = set(), list(node.all_input_nodes)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return seen


def _kv_alias_blocker(out: torch.fx.Node, cache: torch.fx.Node) -> Optional[str]:
    """Why ``out = kv_cache_update(cache, ...)`` cannot write ``cache`` in place, or ``None``.

    Safe exactly when every other reader of the cache's memory runs before the update on
    every engine, i.e. is an ancestor of ``out`` (data dependence orders it first; graph order
    alone does not bind TensorRT), and none of them is a partition output (a view of the old
    cache returned to the caller)."""
    before = _ancestors(out)
    for reader in _memory_readers(cache):
        if reader is out:
            continue
        if reader.op == "output":
            return "the old cache is also returned by the partition"
        if reader not in before:
            return (f"the old cache is also read by {op_name(reader)} ({reader.name}) inside "
                    "the delegate, which does not feed the update, so an in-place write could "
                    "change what it reads")
    return None


def decide_aliases(contract: BindingContract, options: CompileOptions) -> AliasDecision:
    """Decides which outputs update an input in place (DESIGN.md contract 2), once, for the
    blob.

    Only a buffer update (``options.buffer_updates``: the output *is* the method's new value of
    the buffer that the input carries) can be aliased; any other output leaves its inputs
    untouched, as eager does. A buffer update is aliased when ``options.kv_cache`` is
    ``"inplace"``, the buffer is not also read outside the partition
    (``options.shared_inputs``), and either

    * the output is ``executorch_trt.kv_cache_update`` of that input and no other op reads the
      old cache unless it feeds the update (``_kv_alias_blocker``): kind ``kv_cache_update``
      (the engine performs the aliasing update, and reports it); or
    * nothing in the partition reads the input at all (a full overwrite, e.g. the HF static
      cache's step counter after ``FunctionalCopyPass``): kind ``user`` (the exporter declares
      it; the runtime checks shape and dtype and binds the output to the input's storage).

    * the output is a ``torch.cond``'s output that both branches return as that input (a
      cross-attention cache, ``passes/cross_attn_cache.cond_cache_outputs``): kind ``user``
      (the engine's nested program writes the cache where it is bound). This alias is made
      whatever ``options.kv_cache`` says: under ``cond`` the update is correct only in place
      (a copy-back would bind the output to separate storage the reuse branch never
      writes), so an input that cannot be aliased raises ``ValueError``.

    Every other buffer update gets a reason in ``not_in_place``.
    """
    inputs = {n.name: n for n in contract.input_nodes}
    outputs = {n.name: n for n in contract.output_nodes if isinstance(n, torch.fx.Node)}
    shared = set(options.shared_inputs)
    aliases: List[AliasedIO] = []
    reasons: Dict[str, str] = {}
    view_copies: Dict[str, int] = {}
    for out_name, in_name in options.buffer_updates:
        out, inp = outputs.get(out_name), inputs.get(in_name)
        if out is None or inp is None:
            continue  # not this partition's binding (cannot happen for a partitioner's specs)
        if _cond_cache_operand(out) is inp:
            blocker = ("the buffer is also read outside the delegate" if in_name in shared
                       else _kv_alias_blocker(out, inp))
            if blocker is not None:
                raise ValueError(
                    f"TensorRTBackend: torch.cond output '{out_name}' updates cache '{in_name}', "
                    f"which cannot be updated in place: {blocker}. A cross-attention cache "
                    "under torch.cond must be read only through the cond's output.")
            aliases.append(AliasedIO(out_name, in_name, ALIAS_USER, OWNERSHIP_CALLER))
            continue
        if options.kv_cache != KV_CACHE_INPLACE:
            reasons[out_name] = f"kv_cache={options.kv_cache!r} was requested"
            continue
        if in_name in shared:
            reasons[out_name] = ("the buffer is also read outside the delegate, by an operator "
                                 "it does not take, which must see the old value")
            continue
        if out.op == "call_function" and out.target == KV_CACHE_UPDATE and out.args[0] is inp:
            blocker = _kv_alias_blocker(out, inp)
            if blocker is None:
                aliases.append(AliasedIO(out_name, in_name, ALIAS_KV_CACHE_UPDATE, OWNERSHIP_CALLER))
                if out.meta.get(VIEW_COPY_BYTES):
                    view_copies[out_name] = out.meta[VIEW_COPY_BYTES]
            else:
                reasons[out_name] = blocker
            continue
        if not inp.users and out.op == "call_function":
            aliases.append(AliasedIO(out_name, in_name, ALIAS_USER, OWNERSHIP_CALLER))
            continue
        reasons[out_name] = _not_a_write_reason(out, inp)
    order = {n.name: k for k, n in enumerate(contract.output_nodes)}
    aliases.sort(key=lambda a: order[a.output])
    return AliasDecision(tuple(aliases), reasons, view_copies)


def _cond_cache_operand(out: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The ``cond`` operand that output ``out`` is, when ``out`` is ``getitem(cond, j)`` and
    both branches return that operand as a cross-attention cache; else ``None``."""
    if out.op != "call_function" or out.target is not operator.getitem:
        return None
    cond, j = out.args
    if not isinstance(cond, torch.fx.Node) or not is_cond(cond):
        return None
    k = cond_cache_outputs(cond.graph.owning_module, cond).get(j)
    return None if k is None else cond.args[3][k]


def _not_a_write_reason(out: torch.fx.Node, inp: torch.fx.Node) -> str:
    """Why buffer update ``out`` of input ``inp`` is not in place (``decide_aliases``)."""
    match = match_kv_write(out) if out.op == "call_function" else None
    if isinstance(match, str):
        return match
    if out.op == "call_function" and out.target == KV_CACHE_UPDATE:
        return ("the buffer is written more than once in this method (the last write updates "
                f"the result of {op_name(out.args[0])}, not the buffer); only a single write "
                "per method is in place")
    if inp not in _ancestors(out):
        reader = next(iter(inp.users))
        return (f"the old value is also read by {op_name(reader)} ({reader.name}) inside the "
                "delegate, which does not feed the new value, so writing the new value into "
                "the buffer could change what it reads")
    return (f"its new value is computed from the old one by {op_name(out)}, which is not a "
            "KV-cache write")
