"""Small helpers for passes that edit a graph: inserting edge-dialect nodes into a partition
graph, and removing a mutable buffer's write-back once its new value is the buffer's own.

Every inserted node gets ``meta["val"]`` computed by running its op on the inputs' fake
values (in their ``FakeTensorMode``), so later passes (spec propagation, memory planning of the
nested program) see correct shapes and dtypes without re-tracing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from executorch.exir.dialects._ops import ops as exir_ops
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, TensorArgument
from torch.fx.experimental.symbolic_shapes import statically_known_true

from executorch_trt.graph.nodes import arg_node

EDGE = exir_ops.edge


def _val(arg: Any) -> Any:
    return arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg


def insert_before(
    anchor: torch.fx.Node, target: Any, args: Sequence[Any], kwargs: dict[str, Any] | None = None
) -> torch.fx.Node:
    """Inserts ``target(*args, **kwargs)`` just before ``anchor``; returns the new node with
    ``meta["val"]`` set. ``args`` may mix nodes and constants."""
    kwargs = dict(kwargs or {})
    with anchor.graph.inserting_before(anchor):
        node = anchor.graph.call_function(target, tuple(args), kwargs)
    vals = [_val(a) for a in pytree.tree_leaves((args, kwargs))]
    fake_mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    fake_args = pytree.tree_map(_val, (tuple(args), kwargs))
    if fake_mode is not None:
        with fake_mode:
            node.meta["val"] = target(*fake_args[0], **fake_args[1])
    else:
        node.meta["val"] = target(*fake_args[0], **fake_args[1])
    return node


def rewrite_calls(
    ep: ExportedProgram,
    targets: Collection[Any] | None,
    rewrite: Callable[[torch.fx.Graph, torch.fx.Node], bool],
) -> int:
    """Calls ``rewrite(graph, node)`` on each ``call_function`` node of ``ep`` whose target is
    in ``targets`` (every one when None), in every graph (control-flow branches included), and
    recompiles the graphs it changed (``rewrite`` returns whether it did); returns how many
    nodes it changed."""
    count = 0
    for module in ep.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = 0
        for node in list(module.graph.nodes):
            if node.op == "call_function" and (targets is None or node.target in targets):
                changed += rewrite(module.graph, node)
        if changed:
            module.recompile()
        count += changed
    return count


def same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether shapes ``a`` and ``b`` (ints or ``SymInt``s) are provably equal. Uses
    ``statically_known_true``, so comparing a symbolic size never installs a guard: ``int()``
    or ``==`` on a ``SymInt`` would specialise the symbol to its example value for the whole
    graph (the dynamic dimension silently becomes static)."""
    a, b = list(a), list(b)
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def is_static(size: Any) -> bool:
    """Whether ``size`` is a plain ``int`` (not a ``SymInt``)."""
    return isinstance(size, int)


def shape_argument(shape: Sequence[Any], what: str) -> list[int]:
    """``shape`` as a ``view_copy``/``expand_copy`` argument: static sizes as ints, at most one
    symbolic size as ``-1`` (``view`` infers it from the element count; ``expand`` keeps the
    input's size, which the caller has checked is the same symbol). Raises ``ValueError``
    naming ``what`` for two or more symbolic sizes, which a node argument cannot express
    without ``sym_size`` nodes."""
    symbolic = [k for k, d in enumerate(shape) if not is_static(d)]
    if len(symbolic) > 1:
        raise ValueError(
            f"{what}: shape {[str(d) for d in shape]} has more than one dynamic "
            "size; only one dynamic dimension per reshaped value is supported"
        )
    return [-1 if k in symbolic else int(d) for k, d in enumerate(shape)]


def size_arguments(
    anchor: torch.fx.Node, sources: Sequence[torch.fx.Node], shape: Sequence[Any]
) -> list[int | torch.fx.Node] | None:
    """``shape`` as a ``view_copy``/``expand_copy`` argument list built before ``anchor``:
    static sizes as ints, each dynamic size as a ``sym_size(source, k)`` node reading it off a
    dimension ``k`` of one of ``sources`` that has that size (a ``-1`` would make the op infer
    the size by calling ``int()`` on it, which specialises the dynamic size to its example
    value for the whole graph). ``None`` when no source has a dynamic size of ``shape``."""
    args: list[int | torch.fx.Node] = []
    for d in shape:
        if is_static(d):
            args.append(int(d))
            continue
        found = next(
            (
                (src, k, h)
                for src in sources
                for k, h in enumerate(src.meta["val"].shape)
                if not is_static(h) and statically_known_true(h == d)
            ),
            None,
        )
        if found is None:
            return None
        src, k, h = found
        with anchor.graph.inserting_before(anchor):
            size = anchor.graph.call_function(torch.ops.aten.sym_size.int, (src, k))
        size.meta["val"] = h  # set, not computed: calling sym_size would specialise it
        args.append(size)
    return args


def reshape_to(
    anchor: torch.fx.Node,
    value: torch.fx.Node,
    shape: Sequence[Any],
    sizes_from: Sequence[torch.fx.Node] = (),
) -> torch.fx.Node:
    """``value`` broadcast to ``shape`` (``unsqueeze_copy`` to pad its rank with leading 1s,
    then ``expand_copy``), inserted before ``anchor``; ``value`` itself when it already has
    ``shape``. The caller has checked that ``value`` broadcasts to ``shape``. A dynamic size of
    ``shape`` is either ``value``'s own size there or, where ``value`` has size 1, read off one
    of ``sizes_from`` (e.g. the index whose length it is); ``ValueError`` otherwise."""
    current = list(value.meta["val"].shape)
    if same_shape(current, shape):
        return value
    if len(current) < len(shape):
        # unsqueeze, not view_copy(-1): inferring the -1 from a dynamic size calls int() on
        # it, which specialises it to its example value.
        for _ in range(len(shape) - len(current)):
            value = insert_before(anchor, EDGE.aten.unsqueeze_copy.default, (value, 0))
        current = [1] * (len(shape) - len(current)) + current
    if same_shape(current, shape):
        return value
    for have, want in zip(current, shape):
        if (
            not is_static(want)
            and not statically_known_true(have == want)
            and not (is_static(have) and have == 1)
        ):
            raise ValueError(f"reshape_to: cannot broadcast size {have} to dynamic {want}")
    if all(is_static(d) for d in shape):
        return insert_before(anchor, EDGE.aten.expand_copy.default, (value, list(shape)))
    sizes = size_arguments(anchor, [value, *sizes_from], shape)
    if sizes is None:
        raise ValueError(f"reshape_to: no tensor gives the dynamic sizes of {list(shape)}")
    with anchor.graph.inserting_before(anchor):
        expanded = anchor.graph.call_function(EDGE.aten.expand_copy.default, (value, sizes))
    fake = value.meta["val"]
    with fake.fake_mode:  # expand_copy's kernel takes no symbolic sizes; expand does
        expanded.meta["val"] = fake.expand([_val(d) for d in sizes]).contiguous()
    return expanded


def view_as(anchor: torch.fx.Node, value: torch.fx.Node, shape: Sequence[Any]) -> torch.fx.Node:
    """``view_copy(value, shape)`` before ``anchor`` (same number of elements), or ``value``
    itself when it already has ``shape``. ``shape`` may hold one symbolic size
    (``shape_argument``)."""
    if same_shape(value.meta["val"].shape, shape):
        return value
    return insert_before(
        anchor, EDGE.aten.view_copy.default, (value, shape_argument(shape, "view_as"))
    )


def cast_to(anchor: torch.fx.Node, value: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """``value`` converted to ``dtype`` (``_to_dim_order_copy``) before ``anchor``, or
    ``value`` itself when it already has ``dtype``."""
    if value.meta["val"].dtype == dtype:
        return value
    rank = value.meta["val"].dim()
    return insert_before(
        anchor,
        EDGE.dim_order_ops._to_dim_order_copy.default,
        (value,),
        {"dtype": dtype, "dim_order": list(range(rank))},
    )


def _replace_output_specs(old: torch.fx.Node, spec: Any) -> None:
    """In every output node that returns ``old``, sets the spec at ``old``'s positions to
    ``spec``. The output node's meta["spec"] is a flat sequence parallel to its flat args."""
    for user in old.users:
        if user.op != "output" or "spec" not in user.meta:
            continue
        flat_args = pytree.tree_leaves(user.args[0])
        specs = user.meta["spec"]
        flat_specs = list(specs) if isinstance(specs, (list, tuple)) else [specs]
        if len(flat_specs) != len(flat_args):
            continue  # not the layout SpecPropPass writes; leave it to the planner
        for k, arg in enumerate(flat_args):
            if arg is old:
                flat_specs[k] = spec
        user.meta["spec"] = (
            type(specs)(flat_specs) if isinstance(specs, (list, tuple)) else flat_specs[0]
        )


def sync_output_specs(ep: ExportedProgram) -> None:
    """Names, in each of ``ep``'s output specs, the node its graph's output node returns at
    that position. A pass that replaces a node the method returns (``replace_all_uses_with``
    rewires the output node, not the graph signature) leaves the old name behind, and
    ``torch.export``'s verifier then rejects the program ("User output ... is not in the
    correct order or is not found")."""
    output = next(n for n in ep.graph_module.graph.nodes if n.op == "output")
    for spec, arg in zip(ep.graph_signature.output_specs, pytree.tree_leaves(output.args[0])):
        if isinstance(arg, torch.fx.Node) and isinstance(spec.arg, TensorArgument):
            spec.arg = TensorArgument(arg.name)


def remove_write_back(
    copy: torch.fx.Node, value: torch.fx.Node, graph_signature: ExportGraphSignature | None
) -> None:
    """Erases write-back ``copy = copy_(buffer, value)`` (``insert_write_back_for_buffers_pass``)
    whose ``value`` already has the buffer's ``TensorSpec`` (so both are one value at emission):
    the BUFFER_MUTATION output names ``value`` instead (graph and ``graph_signature``), and the
    output node's spec entry becomes the buffer's. Without that last step the planner, which
    collects specs from the output node too, would reserve an arena slot no emitted tensor
    uses. The caller recompiles the graph module."""
    _replace_output_specs(copy, arg_node(copy, 0).meta["spec"])
    copy.replace_all_uses_with(value)
    if graph_signature is not None:
        for spec in graph_signature.output_specs:
            if spec.arg.name == copy.name:
                spec.arg.name = value.name
    copy.graph.erase_node(copy)
