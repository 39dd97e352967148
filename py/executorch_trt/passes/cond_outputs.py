"""Copies of ``torch.cond`` results where ExecuTorch would otherwise hand out a branch's own
tensor: ``copy_cond_outputs`` (a result a nested program returns) and
``SiblingCondOutputsPass`` (a result still read after another control-flow node has run).

``copy_cond_outputs``: a ``torch.cond`` result that a nested program returns is copied into
the output the caller bound, instead of being returned as the branch's own tensor.

Why (verified, ExecuTorch 1.5.1, the portable engine): the emitter ends each branch with a
``MoveCall`` that makes the ``cond``'s output *value* the branch's result (an ``EValue`` copy of
the tensor handle, not of its data). The portable engine binds the nested method's outputs to
the delegate's output storage with ``Method::set_output_data_ptr`` before each call; when that
output is a ``cond`` result, the move replaces the bound tensor with the branch's arena tensor,
so the caller's storage is never written the first time each branch runs (stale values, no
error), and the next ``set_output_data_ptr`` re-points the *branch's* tensor at caller memory
for good. A copy after the ``cond`` is an ordinary kernel writing into the bound output.

``SiblingCondOutputsPass`` (ExecuTorch #21490, verified on 1.5.1 with stock ExecuTorch):
``memory_planning.apply_algo`` plans every control-flow submodule (both branches of every
``cond``, ``while``/``map``/``scan`` bodies) of a graph from offset 0 of one shared region, and
a ``cond`` result *is* its branch's tensor in that region (the ``MoveCall`` above). So with
``a = cond(...)`` then ``b = cond(...)``, the second cond's branch overwrites ``a`` while ``a``
is still to be read: the program returns ``a == b``-like garbage, for either predicate, with no
error. The pass copies each such result (``_clone_dim_order``, planned in the graph's own
memory, after the submodule region) right after its ``cond`` (``to_backend`` may have moved the
``getitem`` after the next cond: it is moved back), and every reader reads the copy.
Results read only before the next control-flow node runs (directly or through a
``view_copy``, which ExecuTorch emits as a view of the same memory) are not copied, except
that a result read through a ``view_copy`` is always copied: ExecuTorch plans the view on the
cond output's own memory, which the ``MoveCall`` bypasses, so even a single cond's view reads
memory no branch wrote (verified on stock ExecuTorch 1.5.1).

Cache outputs of a ``cond`` (``cross_attn_cache.cond_cache_outputs``) are left alone: they are
the cache input itself (``plan_cond_caches_in_place``), never moved.
"""

from __future__ import annotations

import operator

import torch
from executorch.exir import memory
from executorch.exir.pass_base import PassBase, PassResult
from torch.export import ExportedProgram

from executorch_trt.graph.edit import EDGE, insert_before
from executorch_trt.graph.nodes import arg_int, arg_node
from executorch_trt.graph.operator_support import cond_branches, is_cond
from executorch_trt.passes.cross_attn_cache import cond_cache_outputs


def copy_cond_outputs(ep: ExportedProgram) -> int:
    """In edge program ``ep`` (a partition about to become a nested program), replaces each
    graph output that is ``getitem(cond, j)`` (not a cache output) with a
    ``_clone_dim_order`` of it, updating the graph signature's output names. The binding names
    the delegate uses are the partition's, taken before this runs. Modifies ``ep`` in place;
    returns the number of copies inserted."""
    graph = ep.graph_module.graph
    output = graph.output_node()
    flat = list(output.args[0])
    copies = 0
    for k, value in enumerate(flat):
        if not (
            isinstance(value, torch.fx.Node)
            and value.target is operator.getitem
            and isinstance(value.args[0], torch.fx.Node)
            and is_cond(value.args[0])
        ):
            continue
        cond, j = arg_node(value, 0), arg_int(value, 1)
        if j in cond_cache_outputs(ep.graph_module, cond):
            continue
        rank = value.meta["val"].dim()
        copy = insert_before(
            output,
            EDGE.dim_order_ops._clone_dim_order.default,
            (value,),
            {"dim_order": list(range(rank))},
        )
        for spec in ep.graph_signature.output_specs:
            if spec.arg.name == value.name:
                spec.arg.name = copy.name
        flat[k] = copy
        copies += 1
    if copies:
        output.args = (type(output.args[0])(flat),)
        ep.graph_module.recompile()
    return copies


#: Higher-order ops whose submodules ExecuTorch plans in the shared submodule region.
_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.scan,
)


def _control_flow(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in _CONTROL_FLOW


#: Ops ExecuTorch emits as views of their input's memory (``ReplaceViewCopyWithViewPass``
#: turns ``view_copy`` into ``memory.view``): reading one reads the cond's result.
_VIEWS = (EDGE.aten.view_copy.default, torch.ops.aten.view_copy.default, memory.view)


def _readers(value: torch.fx.Node) -> list[torch.fx.Node]:
    """Every node that reads ``value``'s memory: its users, and the users of views of it."""
    readers, stack = [], list(value.users)
    while stack:
        user = stack.pop()
        readers.append(user)
        if user.op == "call_function" and user.target in _VIEWS:
            stack.extend(user.users)
    return readers


def copy_sibling_cond_outputs(graph_module: torch.fx.GraphModule) -> int:
    """In an edge graph (functional, before ``to_executorch``'s out-variant pass), copies each
    ``getitem(cond, j)`` (not a cache output) that is read after a later control-flow node of
    the same graph or read through a ``view_copy``, and points every reader at the copy; likewise in
    every ``cond`` branch (recursively). Returns the number of copies inserted; ``to_executorch``
    renames the outputs in the graph signature after its passes."""
    graph = graph_module.graph
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    flow = [order[n] for n in nodes if _control_flow(n)]
    copies = 0
    for cond in [n for n in nodes if is_cond(n)]:
        for branch in cond_branches(graph_module, cond):
            copies += copy_sibling_cond_outputs(branch)
        later = [i for i in flow if i > order[cond]]
        caches = cond_cache_outputs(graph_module, cond)
        for item in [u for u in cond.users if u.target is operator.getitem]:
            if item.args[1] in caches or not isinstance(item.meta.get("val"), torch.Tensor):
                continue
            viewed = any(u.op == "call_function" and u.target in _VIEWS for u in item.users)
            last_read = max((order.get(u, len(nodes)) for u in _readers(item)), default=-1)
            if not viewed and (not later or last_read < later[0]):
                continue
            # Right after the cond: lowering may have moved the getitem past the next cond.
            cond.append(item)
            rank = item.meta["val"].dim()
            anchor = item.next
            readers = list(item.users)
            copy = insert_before(
                anchor,
                EDGE.dim_order_ops._clone_dim_order.default,
                (item,),
                {"dim_order": list(range(rank))},
            )
            for reader in readers:
                reader.replace_input_with(item, copy)
            copies += 1
    if copies:
        graph_module.recompile()
    return copies


class SiblingCondOutputsPass(PassBase):
    """``copy_sibling_cond_outputs`` as an ``ExecutorchBackendConfig`` pass (module docstring):
    a ``cond`` result read after another ``cond`` (or loop) ran, or through a view, is read
    from a copy."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return PassResult(graph_module, copy_sibling_cond_outputs(graph_module) > 0)
