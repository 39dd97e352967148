"""Cross-attention caches under ``torch.cond``: make the hidden write visible and in place.

The pattern (``docs/executorch_notes.md``, "``torch.cond`` and the cross-attention cache ops")::

    kv = torch.cond((cache != 0).any(),
                    lambda c, x: torch.ops.executorch.alias(c, x)[0],              # reuse
                    lambda c, x: torch.ops.executorch.update_cross_attn_cache(proj(x), c),
                    (self.cache, x))

``update_cross_attn_cache`` declares no mutation (``torch.cond`` branches must be pure), so
torch.export records no BUFFER_MUTATION and stock ExecuTorch 1.5.1 gets it wrong (verified):
the cache is planned as a *constant* (SpecPropPass marks an unmutated buffer const; the emitter
then deduplicates equal constants, so two zero caches become one), the write lands in a
scratch tensor and never persists, ``alias`` copies the cache every step, and with two or more
layers one layer reads another's K/V, because all ``cond`` branches share one arena
(pytorch/executorch#21490: ``memory_planning.py`` plans every branch at offset 0).

Two rewrites fix it:

* ``expose_cross_attn_cache_writes(ep)`` (on the ``ExportedProgram``, before or after
  ``to_edge``, before partitioning; ``TensorRTPartitioner.transform_for_pre_decomposition``
  applies it on ``to_edge_transform_and_lower``): every buffer a
  ``cond`` hands to ``update_cross_attn_cache`` gets a BUFFER_MUTATION output whose new value
  is the ``cond``'s output for it (``getitem(cond, j)``; both branches must return the cache
  at position ``j``). The cache becomes mutable state (never const, never deduplicated). A
  partitioner that takes the ``cond`` then returns the update as a delegate output, which
  ``preprocess`` aliases to the cache input (``backend.aliases.decide_aliases``) and
  ``InplaceMemoryPlanningPass`` makes the buffer's own value, as for any in-place KV write.
* ``plan_cond_caches_in_place(graph_module)`` (after ``ToOutVarPass``, before memory
  planning; ``InplaceMemoryPlanningPass`` runs it on the top-level program, the portable
  engine on its nested one): in each branch the ``.out`` of ``update_cross_attn_cache`` is
  pointed at the cache operand itself and ``alias(...)[i]`` is replaced by its operand (no
  copy); the ``cond`` output and its ``getitem`` get the cache's own ``TensorSpec``, and the
  write-back ``copy_(buffer, getitem)`` becomes a no-op and is removed. The emitter then binds
  the ``cond`` output to the cache's value (it reuses a value per TensorSpec object and emits
  no ``MoveCall`` when a branch output already is the binding value), so nothing lives in the
  shared branch arena and the update costs no copy.

Errors: ``ValueError`` when the two branches of a ``cond`` return different operands at one
output position (the cache would be one thing in one branch and another in the other).
"""

from __future__ import annotations

import itertools
import operator
from typing import cast

import torch
import torch.utils._pytree as pytree
from executorch.exir import memory
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

from executorch_trt.graph.edit import remove_write_back, sync_output_specs
from executorch_trt.graph.nodes import arg_int, arg_node, args_of
from executorch_trt.graph.operator_support import cond_branches, is_cond, op_name, schema_name

UPDATE = "executorch::update_cross_attn_cache"
ALIAS = "executorch::alias"


def _cache_arg(node: torch.fx.Node) -> torch.fx.Node:
    return cast(torch.fx.Node, node.args[1] if len(node.args) > 1 else node.kwargs["cache"])


def _updated_operands(branch: torch.fx.GraphModule) -> set[int]:
    """Operand positions a branch passes as ``update_cross_attn_cache``'s ``cache``."""
    placeholders = [n for n in branch.graph.nodes if n.op == "placeholder"]
    return {
        placeholders.index(_cache_arg(n))
        for n in branch.graph.nodes
        if schema_name(n) == UPDATE and _cache_arg(n) in placeholders
    }


def _operand_names(graph_signature: ExportGraphSignature | None) -> dict[str, str]:
    """``{placeholder name: how the user knows it}``: ``buffer 'layers.0.k_cache'``,
    ``method input 'x'``, ``parameter 'k.weight'``; empty without a signature."""
    if graph_signature is None:
        return {}
    names = {}
    for spec in graph_signature.input_specs:
        kind = str(spec.kind).split(".")[-1].lower().replace("_", " ")
        if spec.kind == InputKind.USER_INPUT:
            names[spec.arg.name] = f"method input '{spec.arg.name}'"
        elif spec.target is not None:
            names[spec.arg.name] = f"{kind} '{spec.target}'"
    return names


def _describe_output(
    gm: torch.fx.GraphModule,
    cond: torch.fx.Node,
    branch: int,
    j: int,
    k: int | None,
    names: dict[str, str],
) -> str:
    """What output ``j`` of branch ``branch`` (0 true, 1 false) of ``cond`` is, in the user's
    terms: the cond operand ``k`` it returns (named through ``names``), else the op computing
    it."""
    if k is not None:
        operand = args_of(cond)[3][k]
        return names.get(operand.name, f"'{operand.name}'")
    graph = cond_branches(gm, cond)[branch]
    outputs = pytree.tree_leaves(graph.graph.output_node().args[0])
    value = outputs[j] if j < len(outputs) else None
    if isinstance(value, torch.fx.Node) and value.op == "call_function":
        return f"a tensor computed by {op_name(value)}"
    return "a computed tensor"


def _mismatch_error(
    gm: torch.fx.GraphModule,
    cond: torch.fx.Node,
    j: int,
    true_k: int | None,
    false_k: int | None,
    names: dict[str, str],
) -> ValueError:
    cache_k = true_k if true_k is not None else false_k
    cache = _describe_output(gm, cond, 0 if true_k is not None else 1, j, cache_k, names)
    return ValueError(
        f"executorch_trt: torch.cond '{cond.name}' output {j} is "
        f"{_describe_output(gm, cond, 0, j, true_k, names)} in the true branch and "
        f"{_describe_output(gm, cond, 1, j, false_k, names)} in the false branch; the "
        f"cross-attention cache {cache} must be returned at one output by both branches, so "
        "that the output is the cache itself: return torch.ops.executorch.alias(cache, ...)[0] "
        "when reusing it (not a tensor computed from it, cache.clone() or a new tensor) and "
        "update_cross_attn_cache(value, cache) when recomputing, and compute from the cond's "
        "output after the cond (k = torch.cond(...); out = k + extra)."
    )


def _returned_in_one_branch_error(
    gm: torch.fx.GraphModule, cond: torch.fx.Node, k: int, names: dict[str, str]
) -> ValueError:
    """The error for a cache operand ``k`` that ``cond`` updates but whose branches do not both
    return it at one output position."""
    true_map, false_map = (_branch_cache_outputs(b) for b in cond_branches(gm, cond))
    for j in sorted(set(true_map) | set(false_map)):
        if k in (true_map.get(j), false_map.get(j)):
            return _mismatch_error(gm, cond, j, true_map.get(j), false_map.get(j), names)
    operand = args_of(cond)[3][k]
    return ValueError(
        f"executorch_trt: torch.cond '{cond.name}' updates "
        f"{names.get(operand.name, repr(operand.name))} with update_cross_attn_cache but no "
        "branch returns it, so the update would be lost; return the update's result from the "
        "recompute branch and alias(cache, ...)[0] from the reuse branch."
    )


def _not_a_buffer_error(
    cond: torch.fx.Node, operand: torch.fx.Node, kind: InputKind | None
) -> ValueError:
    if operand.op != "placeholder":
        what = f"a computed tensor ({op_name(operand)}, e.g. a slice of the cache)"
    elif kind == InputKind.PARAMETER:
        what = "a parameter"
    else:
        what = f"a {str(kind).split('.')[-1].lower().replace('_', ' ')}"
    return ValueError(
        f"executorch_trt: torch.cond '{cond.name}' updates '{operand.name}' with "
        f"update_cross_attn_cache, but '{operand.name}' is {what}, not a buffer: the update "
        "would not persist to the next call. Register the whole cache as a buffer "
        "(register_buffer) and pass that buffer to the cond as it is."
    )


def _contains_update(graph_module: torch.fx.GraphModule) -> bool:
    """Whether ``update_cross_attn_cache`` runs anywhere in ``graph_module`` (nested conds
    included)."""
    for node in graph_module.graph.nodes:
        if schema_name(node) == UPDATE:
            return True
        if is_cond(node) and any(_contains_update(b) for b in cond_branches(graph_module, node)):
            return True
    return False


def _check_no_nested_updates(gm: torch.fx.GraphModule, cond: torch.fx.Node) -> None:
    """Raises ``ValueError`` if a ``cond`` inside ``cond``'s branches updates a cache."""
    for branch in cond_branches(gm, cond):
        for inner in branch.graph.nodes:
            if is_cond(inner) and any(_contains_update(b) for b in cond_branches(branch, inner)):
                raise ValueError(
                    f"executorch_trt: a torch.cond inside a branch of torch.cond '{cond.name}' "
                    "updates a cross-attention cache; only a top-level torch.cond "
                    "may update a cache (its update would not persist otherwise). Use one "
                    "top-level cond per cache, or one cond updating several caches."
                )


def unexposed_cache_writes(
    graph_module: torch.fx.GraphModule, graph_signature: ExportGraphSignature
) -> list[str]:
    """FQNs of the buffers that ``update_cross_attn_cache`` (functional or ``.out``; at the top
    level or in a top-level ``cond``) updates and that are not BUFFER_MUTATION targets:
    ``expose_cross_attn_cache_writes`` was not applied, so ExecuTorch would plan the cache as
    a constant and lose the update."""
    buffers = graph_signature.inputs_to_buffers
    mutated = set(graph_signature.buffers_to_mutate.values())
    found = []
    operands = [_cache_arg(n) for n in _top_level_updates(graph_module)]
    for cond in [n for n in graph_module.graph.nodes if is_cond(n)]:
        for branch in cond_branches(graph_module, cond):
            operands += [cond.args[3][k] for k in sorted(_updated_operands(branch))]
    for operand in operands:
        fqn = buffers.get(operand.name)
        if fqn is not None and fqn not in mutated and fqn not in found:
            found.append(fqn)
    return found


def check_cache_writes_exposed(
    graph_module: torch.fx.GraphModule, graph_signature: ExportGraphSignature | None, where: str
) -> None:
    """Raises ``ValueError`` naming the buffers ``unexposed_cache_writes`` finds (``where``
    names the stage for the message); does nothing without a signature."""
    if graph_signature is None:
        return
    for node in _top_level_updates(graph_module):
        if _cache_arg(node).name in graph_signature.user_inputs:
            raise _method_input_error(
                node, _cache_arg(node), f"{where}: update_cross_attn_cache '{node.name}'"
            )
    missing = unexposed_cache_writes(graph_module, graph_signature)
    if missing:
        raise ValueError(
            f"executorch_trt: {where}: update_cross_attn_cache updates cross-attention cache(s) "
            f"{', '.join(repr(m) for m in missing)} that the program does not record as "
            "mutated buffers, so ExecuTorch would treat them as constants and lose the "
            "updates. Lower with to_edge_transform_and_lower(ep, partitioner="
            "[TensorRTPartitioner()], ...), whose partitioner records them before "
            "decomposition (executorch_trt.export does), or call "
            "executorch_trt.passes.cross_attn_cache.expose_cross_attn_cache_writes(ep) on each "
            "ExportedProgram before to_edge."
        )


def _output_item(cond: torch.fx.Node, j: int) -> torch.fx.Node:
    """A ``getitem(cond, j)`` node: an existing one, else a new one after ``cond``."""
    for user in cond.users:
        if user.target is operator.getitem and user.args[1] == j:
            return user
    with cond.graph.inserting_after(cond):
        item = cond.graph.call_function(operator.getitem, (cond, j))
    item.meta["val"] = cond.meta["val"][j]
    return item


def _method_input_error(node: torch.fx.Node, operand: torch.fx.Node, where: str) -> ValueError:
    return ValueError(
        f"executorch_trt: {where} updates method input '{operand.name}' with "
        "update_cross_attn_cache; a method input is the caller's tensor for one call, so the "
        "cache would not persist to the next call and the caller's tensor would not be "
        "written (eager PyTorch writes into it). Register the cache as a buffer of the module "
        "(register_buffer) so it is state the program owns."
    )


def _is_view(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ATen view (its result aliases its input: ``slice``, ``view``,
    ``select``, ``transpose``...), read off the op's schema."""
    schema = getattr(node.target, "_schema", None)
    return (
        node.op == "call_function"
        and schema is not None
        and bool(schema.returns)
        and schema.returns[0].alias_info is not None
        and not schema.returns[0].alias_info.is_write
    )


def _top_level_updates(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if schema_name(n) == UPDATE]


def _expose_top_level_updates(ep: ExportedProgram, cond_fqns: set[str]) -> list[str]:
    """Makes each ``update_cross_attn_cache(value, cache)`` outside a ``cond`` the eager
    write it is. The op declares no mutation, so torch.export records none: the graph goes on
    reading the old ``cache`` after the call, and a buffer it writes becomes a constant (the
    write is lost). Eager writes ``cache`` in place and returns a copy, so here

    * a *live* read of the cache after an update (a reader of the cache node itself: the
      buffer's placeholder, or the value export recorded for it after an in-place op) reads
      the latest update before it, and a buffer's last update becomes its BUFFER_MUTATION
      value;
    * a read of an update's *result* after a later update of the same cache reads a copy of
      it taken right after it (the lowered result is the cache itself, which the later update
      overwrites in place).

    Returns the FQNs of the buffers newly recorded as mutated. ``ValueError`` for a cache that
    is a method input, a parameter or constant, a view of another tensor (eager writes through
    it into that tensor), or a buffer a ``cond`` also updates (``cond_fqns``)."""
    updates = _top_level_updates(ep.graph_module)
    if not updates:
        return []
    gm, sig = ep.graph_module, ep.graph_signature
    kinds = {s.arg.name: s.kind for s in sig.input_specs}
    buffers = {s.arg.name: s.target for s in sig.input_specs if s.kind == InputKind.BUFFER}
    output = gm.graph.output_node()
    mutation_specs = {
        s.target: k for k, s in enumerate(sig.output_specs) if s.kind == OutputKind.BUFFER_MUTATION
    }
    # The nodes that are a buffer's live value: its placeholder, and its last in-place write.
    current: dict[torch.fx.Node, str] = {
        n: buffers[n.name] for n in gm.graph.nodes if n.op == "placeholder" and n.name in buffers
    }
    out_args = list(output.args[0])
    for fqn, k in mutation_specs.items():
        if isinstance(out_args[k], torch.fx.Node):
            current[out_args[k]] = fqn
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    chains: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in updates:
        chains.setdefault(_cache_arg(node), []).append(node)
    last: dict[str, torch.fx.Node] = {}
    for cache, chain in chains.items():
        where = f"update_cross_attn_cache '{chain[0].name}' (outside a torch.cond)"
        fqn = current.get(cache)
        if fqn is None and cache.op == "placeholder":
            if kinds.get(cache.name) == InputKind.USER_INPUT:
                raise _method_input_error(chain[0], cache, where)
            kind = str(kinds.get(cache.name)).split(".")[-1].lower().replace("_", " ")
            raise ValueError(
                f"executorch_trt: {where} writes '{cache.name}', a {kind}, not a buffer: the "
                "write would be lost. Register the cache as a buffer (register_buffer)."
            )
        if fqn is None and _is_view(cache):
            raise ValueError(
                f"executorch_trt: {where} writes '{cache.name}', a view "
                f"({op_name(cache)}) of another tensor: eager PyTorch writes through the view "
                "into that tensor, which the exported program cannot follow. Pass the whole "
                "cache (a buffer) to update_cross_attn_cache."
            )
        if fqn in cond_fqns:
            raise ValueError(
                f"executorch_trt: buffer '{fqn}' is updated by {where} and by a torch.cond; "
                "update a cross-attention cache in one place."
            )
        for reader in list(cache.users):  # live reads: the latest update before each
            before = [u for u in chain if order[u] < order[reader]]
            if before:
                reader.replace_input_with(cache, before[-1])
        for u, later in itertools.pairwise(chain):  # snapshot reads after the next update
            late = [r for r in u.users if r is not later and order[r] > order[later]]
            if late:
                with gm.graph.inserting_after(u):
                    copy = gm.graph.call_function(torch.ops.aten.clone.default, (u,))
                copy.meta["val"] = u.meta["val"].clone()
                for reader in late:
                    reader.replace_input_with(u, copy)
        if fqn is not None:
            last[fqn] = chain[-1]
    added = [(fqn, node) for fqn, node in last.items() if fqn not in mutation_specs]
    output.args = (tuple(n for _, n in added) + tuple(output.args[0]),)
    sig.output_specs[:0] = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(name=n.name), fqn) for fqn, n in added
    ]
    sync_output_specs(ep)
    gm.recompile()
    return [fqn for fqn, _ in added]


def expose_cross_attn_cache_writes(ep: ExportedProgram) -> list[str]:
    """Records each buffer a ``cond`` updates with ``update_cross_attn_cache`` as a
    BUFFER_MUTATION whose new value is the ``cond``'s output for it, ``getitem(cond, j)``
    (created if the program does not read it; module docstring), and each buffer updated
    outside a ``cond`` as the eager write it is (``_expose_top_level_updates``). Modifies ``ep``
    in place; returns the buffers' FQNs (empty when the program has no such update).
    Idempotent.

    Raises ``ValueError`` when the cache is a method input (it could not persist across calls;
    register it as a buffer), and when the branches do not both return the cache at one output
    position (``alias(cache, ...)[i]`` in one, ``update_cross_attn_cache(value, cache)`` in the
    other). Also raises ``ValueError`` for a cache that is not a buffer passed to the ``cond``
    as it is (a slice of one, a parameter, a constant or a computed tensor: the update would
    not persist, or would write a constant), and for an update inside a nested ``cond``."""
    gm, sig = ep.graph_module, ep.graph_signature
    buffers = {s.arg.name: s.target for s in sig.input_specs if s.kind == InputKind.BUFFER}
    user_inputs = {s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT}
    kinds = {s.arg.name: s.kind for s in sig.input_specs}
    mutated = {s.target for s in sig.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    exposed: list[torch.fx.Node] = []
    fqns: list[str] = []
    for node in list(gm.graph.nodes):
        if not is_cond(node):
            continue
        _check_no_nested_updates(gm, node)
        positions = set().union(*(_updated_operands(b) for b in cond_branches(gm, node)))
        returned = {k: j for j, k in cond_cache_outputs(gm, node).items()}
        for k in sorted(positions):
            operand = node.args[3][k]
            if operand.name in user_inputs:
                raise _method_input_error(node, operand, f"torch.cond '{node.name}'")
            fqn = buffers.get(operand.name) if operand.op == "placeholder" else None
            if fqn is None:
                raise _not_a_buffer_error(node, operand, kinds.get(operand.name))
            if fqn in mutated:
                continue
            if k not in returned:
                raise _returned_in_one_branch_error(gm, node, k, _operand_names(sig))
            exposed.append(_output_item(node, returned[k]))
            fqns.append(fqn)
            mutated.add(fqn)
    if exposed:
        output = gm.graph.output_node()
        # BUFFER_MUTATION outputs come first in an ExportedProgram's output list.
        output.args = (tuple(exposed) + tuple(output.args[0]),)
        sig.output_specs[:0] = [
            OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(name=n.name), fqn)
            for n, fqn in zip(exposed, fqns)
        ]
        gm.recompile()
    cond_fqns = {
        s.target
        for s in sig.output_specs
        if s.kind == OutputKind.BUFFER_MUTATION
        and any(s.arg.name == n.name for n in _cond_outputs(gm))
    }
    return fqns + _expose_top_level_updates(ep, cond_fqns)


def _cond_outputs(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [
        u for n in gm.graph.nodes if is_cond(n) for u in n.users if u.target is operator.getitem
    ]


def _returned_operand(value: object, placeholders: list[torch.fx.Node]) -> int | None:
    """The operand position a functional branch output is the cache of:
    ``update_cross_attn_cache(v, placeholder k)`` or ``alias(..)[i]`` whose argument ``i`` is
    placeholder ``k``; ``None`` for anything else."""
    if not isinstance(value, torch.fx.Node) or value.op != "call_function":
        return None
    if schema_name(value) == UPDATE:
        source = _cache_arg(value)
    elif value.target is operator.getitem and schema_name(arg_node(value, 0)) == ALIAS:
        source = arg_node(arg_node(value, 0), arg_int(value, 1))
    else:
        return None
    return placeholders.index(source) if source in placeholders else None


def _branch_cache_outputs(branch: torch.fx.GraphModule) -> dict[int, int]:
    """``{output position: operand position}`` for the outputs of one functional branch that
    are a cache operand (``_returned_operand``)."""
    placeholders = [n for n in branch.graph.nodes if n.op == "placeholder"]
    outputs = pytree.tree_leaves(branch.graph.output_node().args[0])
    found = {j: _returned_operand(v, placeholders) for j, v in enumerate(outputs)}
    return {j: k for j, k in found.items() if k is not None}


def cond_cache_outputs(graph_module: torch.fx.GraphModule, cond: torch.fx.Node) -> dict[int, int]:
    """``{output position: operand position}`` of ``cond`` (functional graph, before
    ``ToOutVarPass``) for the outputs both branches return as the same cache operand: the
    reuse branch as ``alias(cache, ...)[i]``, the recompute branch as
    ``update_cross_attn_cache(value, cache)``."""
    true_map, false_map = (_branch_cache_outputs(b) for b in cond_branches(graph_module, cond))
    return {j: k for j, k in true_map.items() if false_map.get(j) == k}


def _drop_if_unused_alloc(graph: torch.fx.Graph, node: object) -> None:
    if isinstance(node, torch.fx.Node) and node.target is memory.alloc and not node.users:
        graph.erase_node(node)


def _rewrite_branch(branch: torch.fx.GraphModule) -> dict[int, int]:
    """In one (out-variant) branch: ``update_cross_attn_cache.out`` writes into its cache
    operand, ``alias.out(...)[i]`` becomes operand ``i``. Returns output position -> operand
    position for the outputs that now are an operand."""
    graph = branch.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in list(graph.nodes):
        name = schema_name(node)
        if name == UPDATE and _cache_arg(node) in placeholders and "out" in node.kwargs:
            old = node.kwargs["out"]
            node.kwargs = {**node.kwargs, "out": _cache_arg(node)}
            node.meta["spec"] = _cache_arg(node).meta["spec"]
            _drop_if_unused_alloc(graph, old)
        elif name == ALIAS:
            for user in list(node.users):
                if user.target is operator.getitem:
                    user.replace_all_uses_with(node.args[user.args[1]])
                    graph.erase_node(user)
            if not node.users:
                outs = [v for v in node.kwargs.values() if isinstance(v, torch.fx.Node)]
                graph.erase_node(node)
                for out in outs:
                    _drop_if_unused_alloc(graph, out)
    branch.recompile()
    result = {}
    for j, value in enumerate(pytree.tree_leaves(graph.output_node().args[0])):
        if schema_name(value) == UPDATE and value.kwargs.get("out") in placeholders:
            value = value.kwargs["out"]  # the out variant returns the operand it wrote
        if value in placeholders:
            result[j] = placeholders.index(value)
    return result


def plan_cond_caches_in_place(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None = None,
) -> int:
    """Applies the second rewrite of the module docstring to every ``cond`` of an
    out-variant graph (between ``ToOutVarPass`` and memory planning), and removes the
    write-back ``copy_(buffer, getitem(cond, j))`` of each output it binds to a buffer
    (``graph_signature``, when given, is updated to match). Returns the number of ``cond``
    outputs now bound to their cache's storage. Raises ``ValueError`` when the branches return
    different operands at one position while one of them returns a cache."""
    bound = 0
    items = []
    for cond in [n for n in graph_module.graph.nodes if is_cond(n)]:
        if not any(
            schema_name(n) in (UPDATE, ALIAS)
            for b in cond_branches(graph_module, cond)
            for n in b.graph.nodes
        ):
            continue
        true_map, false_map = (_rewrite_branch(b) for b in cond_branches(graph_module, cond))
        operands = cond.args[3]
        specs = cond.meta["spec"]
        flat = list(specs) if isinstance(specs, (list, tuple)) else [specs]
        for j in set(true_map) | set(false_map):
            if true_map.get(j) != false_map.get(j):
                raise _mismatch_error(
                    graph_module,
                    cond,
                    j,
                    true_map.get(j),
                    false_map.get(j),
                    _operand_names(graph_signature),
                )
            spec = operands[true_map[j]].meta["spec"]
            flat[j] = spec
            for user in cond.users:
                if user.target is operator.getitem and user.args[1] == j:
                    user.meta["spec"] = spec
                    items.append(user)
            bound += 1
        cond.meta["spec"] = type(specs)(flat) if isinstance(specs, (list, tuple)) else flat[0]
    for item in items:
        for copy in list(item.users):
            if (
                copy.target == torch.ops.aten.copy_.default
                and copy.args[1] is item
                and copy.args[0].meta.get("spec") is item.meta["spec"]
            ):
                remove_write_back(copy, item, graph_signature)
    if items:
        graph_module.recompile()
    return bound
