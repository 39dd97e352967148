"""``copy_cond_outputs``: a ``torch.cond`` result that a nested program returns is copied into
the output the caller bound, instead of being returned as the branch's own tensor.

Why (verified, ExecuTorch 1.5.1, the portable engine): the emitter ends each branch with a
``MoveCall`` that makes the ``cond``'s output *value* the branch's result (an ``EValue`` copy of
the tensor handle, not of its data). The portable engine binds the nested method's outputs to
the delegate's output storage with ``Method::set_output_data_ptr`` before each call; when that
output is a ``cond`` result, the move replaces the bound tensor with the branch's arena tensor,
so the caller's storage is never written the first time each branch runs (stale values, no
error), and the next ``set_output_data_ptr`` re-points the *branch's* tensor at caller memory
for good. A copy after the ``cond`` is an ordinary kernel writing into the bound output.

Cache outputs of a ``cond`` (``cross_attn_cache.cond_cache_outputs``) are left alone: they are
the cache input itself (``plan_cond_caches_in_place``), never moved.
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from executorch_trt.operator_support import is_cond
from executorch_trt.passes.cross_attn_cache import cond_cache_outputs
from executorch_trt.passes.graph_edit import EDGE, insert_before


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
        if not (isinstance(value, torch.fx.Node) and value.target is operator.getitem
                and isinstance(value.args[0], torch.fx.Node) and is_cond(value.args[0])):
            continue
        cond, j = value.args
        if j in cond_cache_outputs(ep.graph_module, cond):
            continue
        rank = value.meta["val"].dim()
        copy = insert_before(output, EDGE.dim_order_ops._clone_dim_order.default, (value,),
                             {"dim_order": list(range(rank))})
        for spec in ep.graph_signature.output_specs:
            if spec.arg.name == value.name:
                spec.arg.name = copy.name
        flat[k] = copy
        copies += 1
    if copies:
        output.args = (type(output.args[0])(flat),)
        ep.graph_module.recompile()
    return copies
