"""The binding contract of one partition: its bindings in delegate argument order.

Order (the contract's "Order" rule): the runtime binds ``execute()`` argument ``i`` to
``inputs[i]`` and argument ``len(inputs) + j`` to ``outputs[j]``. ExecuTorch passes a delegate
its inputs in the fused partition's placeholder order (first use inside the partition, not the
method's input order) and its outputs in the partition's output order. Both orders are read
from the partition program and *asserted* against its graph: ``binding_contract`` raises
``ValueError`` if ``graph_signature.user_inputs``/``user_outputs`` disagree with the graph's
placeholders/outputs, or if the partition carries a mutation output (which
``arrange_graph_outputs`` would move ahead of the user outputs). Which outputs alias an input
is ``aliases.decide_aliases``'s.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import cast

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from executorch_trt.format.blob import Binding, Dimension, SymbolRange
from executorch_trt.format.wire import MAX_DIMENSION, dtype_name
from executorch_trt.graph.dynamic_shapes import (
    SYMBOLIC_KINDS,
    WHAT_TO_DO,
    describe_symbols,
    finite_ranges,
    shape_text,
    symbols_of,
)


@dataclasses.dataclass(frozen=True)
class BindingContract:
    """Bindings in delegate argument order, plus the output/input nodes they came from."""

    inputs: tuple[Binding, ...]
    outputs: tuple[Binding, ...]
    input_nodes: tuple[torch.fx.Node, ...]
    output_nodes: tuple[torch.fx.Node, ...]
    #: The dynamic dimensions the bindings name (blob format version 2), in first-use order.
    symbols: tuple[SymbolRange, ...] = ()


def _contiguous(val: torch.Tensor) -> bool:
    """Whether ``val`` is laid out in the default dim order (symbolic sizes count as yes: the
    dynamic-shape check reports those)."""
    try:
        return bool(val.is_contiguous())
    except Exception:  # noqa: BLE001 - unbacked symbolic strides
        return True


def _dimension(
    size: int | torch.SymInt,
    name: str,
    dim: int,
    node: torch.fx.Node,
    symbols: dict[str, SymbolRange],
    ranges: dict[str, tuple[int, int]],
) -> Dimension:
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
    where = (
        f"TensorRTBackend: binding '{name}' dimension {dim} "
        f"(shape {shape_text(node.meta['val'].shape)})"
    )
    if not expr.is_Symbol:
        raise ValueError(
            f"{where} is the expression {expr} of dynamic sizes; a delegate binding's dynamic "
            "dimension must be a dynamic size itself (a torch.export.Dim). Compute the "
            "expression outside the delegate, or make the input's size its own Dim."
        )
    shape_env = size.node.shape_env
    if str(expr) not in ranges and expr in shape_env.var_to_range:
        ranges = finite_ranges({expr: shape_env.var_to_range[expr]})
    lower, upper = ranges.get(str(expr), (0, None))
    if upper is None or upper > MAX_DIMENSION:
        raise ValueError(
            f"{where} is the dynamic size {expr} with no finite upper bound below 2^31; "
            "ExecuTorch plans memory at the upper bound, so give it one: "
            "torch.export.Dim(name, min=..., max=...)"
        )
    examples = getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val
    example = examples.get(expr)
    opt = min(max(int(example), lower), upper) if example is not None else upper
    symbols.setdefault(str(expr), SymbolRange(str(expr), lower, upper, opt))
    return str(expr)


def _binding(
    name: str,
    node: torch.fx.Node,
    symbols: dict[str, SymbolRange],
    ranges: dict[str, tuple[int, int]],
) -> Binding:
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
            f"for shape {list(val.shape)}, e.g. a channels_last buffer or a transposed example "
            "input); the delegate binds tensors in the default (contiguous) dim order only. "
            "Make it contiguous before export: a buffer with register_buffer(name, "
            "tensor.contiguous()), an example input by passing x.contiguous() to "
            "torch.export.export (at run time the method takes any layout)."
        )
    shape = tuple(
        _dimension(d, name, dim, node, symbols, ranges) for dim, d in enumerate(val.shape)
    )
    return Binding(name, dtype, shape)


def binding_contract(
    ep: ExportedProgram, symbol_ranges: Sequence[tuple[str, int, int]] = ()
) -> BindingContract:
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
    symbols: dict[str, SymbolRange] = {}
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
                    "out of the delegate."
                )
    names = _user_symbol_names(list(placeholders) + list(output_nodes), symbols)
    return BindingContract(
        inputs=_renamed(inputs, names),
        outputs=_renamed(outputs, names),
        input_nodes=tuple(placeholders),
        output_nodes=tuple(output_nodes),
        symbols=tuple(dataclasses.replace(s, name=names[key]) for key, s in symbols.items()),
    )


def _dim_name(size: torch.SymInt) -> str | None:
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
            return cast(str, debug_names[source_name])
    return None


def _user_symbol_names(
    nodes: Sequence[torch.fx.Node], symbols: dict[str, SymbolRange]
) -> dict[str, str]:
    """``{symbol key (str(expr)): the name the blob records}``: the user's ``Dim`` name
    (``_dim_name``) where there is one and no other symbol of the blob would record the same
    name, else the shape environment's own (``"s58"``). The runtime's messages name a dynamic
    size by what the blob records, and ``Dim("T")`` is what the user wrote; the names of one
    blob must stay unique (``docs/formats/delegate_blob.md``)."""
    preferred: dict[str, str] = {}
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


def _renamed(bindings: tuple[Binding, ...], names: dict[str, str]) -> tuple[Binding, ...]:
    return tuple(
        dataclasses.replace(
            b, shape=tuple(names.get(d, d) if isinstance(d, str) else d for d in b.shape)
        )
        for b in bindings
    )
