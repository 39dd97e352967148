"""Dynamic shapes: what the delegate takes (blob format version 2), and the rejections that
name what it does not.

A delegate binding's dimension may be a dynamic size: a ``torch.export.Dim`` with a finite
upper bound (``Dim("T", min=1, max=128)``), written into the blob as a symbol with its range
(``docs/formats/delegate_blob.md`` version 2). ExecuTorch plans such a tensor at its upper bound and
the runtime checks every call's sizes against the range. Rejected, each naming the method, the
input, the dimension, the symbol and its range (``ep.range_constraints``) and what to do:

* ``check_dynamic_shapes(ep, method)`` (``executorch_trt.export``, per method, before
  lowering): a symbolic-int user input, a user input dimension that is an expression of
  symbols, or a dynamic size without a finite upper bound.
* ``check_partition_boundary(ep, nodes)`` (``TensorRTPartitioner``, per partition): a symbolic
  int/float/bool crossing the partition boundary, and a tensor whose dimension is an
  expression of symbols. (A ``sym_size`` read both inside and outside the delegate does not
  cross it under ``executorch_trt.export``: ``passes/size_copies.py`` gives the delegate its
  own copy.)

``finite_ranges(range_constraints)`` reads ``{symbol: (min, max)}`` off an exported program.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.export import ExportedProgram

WHAT_TO_DO = (
    "The delegate takes a dynamic dimension when it is a torch.export.Dim with a finite max "
    "(e.g. Dim('T', min=1, max=128)) that the delegate's inputs carry; pass sizes as tensor "
    "dimensions, not as ints, and keep expressions of sizes (2*T, T+1) outside the delegate, "
    "or export with static shapes (one method per shape, e.g. "
    "executorch_trt.export({'prefill': ep_prefill, 'decode': ep_decode}))"
)


#: The symbolic scalar types and how messages name them.
SYMBOLIC_KINDS = {torch.SymInt: "int", torch.SymFloat: "float", torch.SymBool: "bool"}


def shape_text(shape: Iterable[Any]) -> str:
    """``"[s37, 1, 4]"``: a shape with symbolic sizes printed as their expressions."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


def symbols_of(value: Any) -> list[str]:
    """Names of the free symbols of a ``SymInt``/``SymFloat``/``SymBool`` (sorted)."""
    node = getattr(value, "node", None)
    expr = getattr(node, "expr", None)
    if expr is None:
        return [str(value)]
    return sorted(str(s) for s in expr.free_symbols)


def _bound(value: Any) -> str:
    text = str(value)
    return text.replace("int_oo", "inf").replace("oo", "inf")


def _range(range_constraints: Mapping[Any, Any] | None, symbol: str) -> str | None:
    for sym, vr in (range_constraints or {}).items():
        if str(sym) == symbol:
            return f"[{_bound(vr.lower)}, {_bound(vr.upper)}]"
    return None


def symbol_sources(
    graph: torch.fx.Graph, input_names: Iterable[str] | None = None
) -> dict[str, str]:
    """``{symbol: where it comes from}`` for every symbol that is exactly a dimension of a
    placeholder of ``graph`` (only ``input_names`` if given, e.g. the user inputs) or a
    symbolic-int placeholder, e.g. ``{"s37": "dimension 0 of input 'k'"}`` (the first such
    place, in placeholder order)."""
    names = None if input_names is None else set(input_names)
    sources: dict[str, str] = {}
    for node in graph.nodes:
        if node.op != "placeholder" or (names is not None and node.name not in names):
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for dim, size in enumerate(val.shape):
                if not isinstance(size, int):
                    expr = str(getattr(size.node, "expr", size))
                    sources.setdefault(expr, f"dimension {dim} of input {node.name!r}")
        elif isinstance(val, torch.SymInt):
            sources.setdefault(str(getattr(val.node, "expr", val)), f"input {node.name!r}")
    return sources


def describe_symbols(
    symbols: Iterable[str],
    graph: torch.fx.Graph,
    input_names: Iterable[str] | None = None,
    range_constraints: Mapping[Any, Any] | None = None,
) -> str:
    """``"s37 in [1, 8] (dimension 0 of input 'k')"`` for each symbol, joined by ``"; "``: the
    range from ``range_constraints`` (``ep.range_constraints``) when given, the source from
    ``symbol_sources(graph, input_names)``."""
    sources = symbol_sources(graph, input_names)
    parts = []
    for symbol in symbols:
        text = symbol
        rng = _range(range_constraints, symbol)
        if rng:
            text += f" in {rng}"
        if symbol in sources:
            text += f" = {sources[symbol]}"
        parts.append(text)
    return "; ".join(parts)


def _describe(ep: ExportedProgram, symbols: Iterable[str]) -> str:
    return describe_symbols(symbols, ep.graph, ep.graph_signature.user_inputs, ep.range_constraints)


def finite_ranges(range_constraints: Mapping[Any, Any] | None) -> dict[str, tuple[int, int]]:
    """``{symbol: (min, max)}`` for every symbol of ``range_constraints`` (an
    ``ExportedProgram.range_constraints``) with a finite upper bound; the minimum is at least
    0."""
    ranges: dict[str, tuple[int, int]] = {}
    for sym, vr in (range_constraints or {}).items():
        # torch's int_oo (an unbounded Dim) claims is_finite; a finite bound is an Integer.
        if getattr(vr.upper, "is_Integer", False) and getattr(vr.lower, "is_Integer", False):
            ranges[str(sym)] = (max(int(vr.lower), 0), int(vr.upper))
    return ranges


def _shape_env(ep: ExportedProgram) -> Any:
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for d in val.shape:
                if isinstance(d, torch.SymInt):
                    return d.node.shape_env
    return None


def _declared_minimum(shape_env: Any, symbol: Any) -> int | None:
    """The minimum the user declared for ``symbol`` (``torch.export.Dim(min=...)``), read off
    the shape environment's tracked inputs: ``var_to_sources`` names the input dimension,
    whose ``constraint_sizes`` entry holds the declared range. ``None`` when not found."""
    for source in shape_env.var_to_sources.get(symbol, ()):
        base, idx = getattr(source, "base", None), getattr(source, "idx", None)
        if base is None or idx is None:
            continue
        for tracked in getattr(shape_env, "tracked_fakes", None) or ():
            if tracked.source.name != base.name:
                continue
            sizes = getattr(tracked.symbolic_context, "constraint_sizes", None) or ()
            constraint = sizes[idx] if idx < len(sizes) else None
            lower = getattr(getattr(constraint, "vr", None), "lower", None)
            if lower is not None and (
                getattr(lower, "is_Integer", False) or isinstance(lower, int)
            ):
                return int(lower)
    return None


def declared_ranges(
    ep: ExportedProgram, recorded: Mapping[str, tuple[int, int]] | None = None
) -> dict[str, tuple[int, int]]:
    """``finite_ranges(ep.range_constraints)`` with each minimum the user declared.

    ``torch.export`` reports ``Dim("T", min=1, max=95)`` as ``[1, 95]``, but ExecuTorch
    recomputes an edge program's ``range_constraints`` from the shape environment after a
    pass, whose ranges start at 2 (sizes 0 and 1 are specialised apart): the partitioner
    would then refuse every ``T = 1`` call. A minimum of exactly 2 is replaced by the declared
    one when that is lower: read off the shape environment's tracked inputs, else from
    ``recorded`` (``{symbol: (min, max)}`` of the ATen program before ``to_edge``: a program
    reloaded with ``torch.export.load`` tracks no inputs), when it has the same maximum. Any
    other range is the program's own."""
    ranges = finite_ranges(ep.range_constraints)
    shape_env = _shape_env(ep)
    for sym in ep.range_constraints or {}:
        name = str(sym)
        if name not in ranges or ranges[name][0] != 2:
            continue
        declared = _declared_minimum(shape_env, sym) if shape_env is not None else None
        if declared is None and recorded and recorded.get(name, (None, None))[1] == ranges[name][1]:
            declared = recorded[name][0]
        if declared is not None and 0 <= declared < 2:
            ranges[name] = (declared, ranges[name][1])
    return ranges


def _problem(size: torch.SymInt, range_constraints: Mapping[Any, Any] | None) -> str | None:
    """Why dynamic size ``size`` (a ``SymInt``) cannot be a binding dimension, or ``None``."""
    expr = size.node.expr
    if not expr.is_Symbol:
        return "an expression of dynamic sizes"
    if str(expr) not in finite_ranges(range_constraints):
        return "without a finite upper bound"
    return None


def _dynamic_description(value: Any) -> list[str] | None:
    """The symbols of ``value`` if it is dynamic (a tensor with a symbolic dimension, or a
    symbolic scalar), else ``None``."""
    if isinstance(value, torch.Tensor):
        symbols: set[str] = set()
        for size in value.shape:
            if not isinstance(size, int):
                symbols.update(symbols_of(size))
        return sorted(symbols) if symbols else None
    if isinstance(value, tuple(SYMBOLIC_KINDS)):
        return symbols_of(value)
    return None


def check_dynamic_shapes(ep: ExportedProgram, method: str) -> None:
    """Raises ``ValueError`` if a user input of ``ep`` (method ``method``) is a symbolic int,
    or has a dynamic dimension the delegate cannot bind (an expression of symbols, or one
    without a finite upper bound), naming the method, the input, the dimension, the symbol and
    its range (``ep.range_constraints``), and saying what to do (``WHAT_TO_DO``). A dimension
    that is a ``torch.export.Dim`` with a finite max is accepted."""
    user_inputs = set(ep.graph_signature.user_inputs)
    problems = []
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for dim, size in enumerate(val.shape):
                if isinstance(size, int):
                    continue
                problem = _problem(size, ep.range_constraints)
                if problem:
                    symbol = describe_symbols(symbols_of(size), ep.graph, (), ep.range_constraints)
                    problems.append(
                        f"input {node.name!r} dimension {dim} is {size} "
                        f"({symbol}), {problem}, in shape {shape_text(val.shape)}"
                    )
        elif isinstance(val, tuple(SYMBOLIC_KINDS)):
            symbol = describe_symbols(symbols_of(val), ep.graph, (), ep.range_constraints)
            problems.append(
                f"input {node.name!r} is a symbolic {SYMBOLIC_KINDS[type(val)]} ({symbol})"
            )
    if problems:
        raise ValueError(f"executorch_trt: method {method!r}: {'; '.join(problems)}. {WHAT_TO_DO}")


def check_partition_boundary(ep: ExportedProgram, nodes: Iterable[torch.fx.Node]) -> None:
    """Raises ``ValueError`` if a value entering or leaving the partition made of ``nodes``
    (a node of ``ep``'s graph each) is a symbolic scalar, or a tensor with a dimension that is
    an expression of symbols. The message names the value, its symbols with their ranges and
    the method inputs they come from, and says what to do (``WHAT_TO_DO``). Dimensions that
    are a single symbol pass (the bindings carry them; ``contract``)."""
    members = set(nodes)
    crossing = []
    for node in members:
        for inp in node.all_input_nodes:
            if inp not in members:
                crossing.append(("input", inp))
        if any(user not in members for user in node.users):
            crossing.append(("output", node))
    order = {n: k for k, n in enumerate(ep.graph.nodes)}
    problems, seen = [], set()
    for role, node in sorted(crossing, key=lambda rn: (rn[0] != "input", order.get(rn[1], 0))):
        if node in seen:
            continue
        seen.add(node)
        symbols = _dynamic_description(node.meta.get("val"))
        if symbols is None:
            continue
        val = node.meta["val"]
        if isinstance(val, torch.Tensor) and all(
            isinstance(d, int) or d.node.expr.is_Symbol for d in val.shape
        ):
            continue
        what = (
            f"a tensor of shape {shape_text(val.shape)}"
            if isinstance(val, torch.Tensor)
            else f"a symbolic {SYMBOLIC_KINDS[type(val)]}"
        )
        problems.append(f"delegate {role} {node.name!r} is {what} ({_describe(ep, symbols)})")
    if problems:
        raise ValueError(f"TensorRTPartitioner: {'; '.join(problems)}. {WHAT_TO_DO}")
