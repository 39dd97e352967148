"""``mean_as_pooling``: a mean over the last dimension of a 3-D value (RMSNorm's
``x.pow(2).mean(-1, keepdim=True)``) in the form ExecuTorch's XNNPACK partitioner takes, in the
portable engine's nested program.

The XNNPACK partitioner takes ``mean.dim`` only over the two inner dimensions of a 4-D tensor,
with ``keepdim`` (XNNPACK's global average pooling; ``MeanDimConfig``). A 3-D
``mean(x, [-1], keepdim=True)`` would stay on ExecuTorch's portable kernel, and every norm would
cut the XNNPACK subgraph in two: three XNNPACK calls per decoder layer instead of one. Each one
in the top-level graph is rewritten::

    m = mean.dim(x[B, T, H], [-1], True)
  ->
    m = view_copy(mean.dim(unsqueeze_copy(x, -1), [2, 3], True), [B, -1, 1])

``unsqueeze_copy`` on the trailing dimension and ``view_copy`` with one inferred size are
both XNNPACK's. The value is the same mean of the same H numbers. A mean of another rank,
dtype or dimension, or whose leading dimensions are both dynamic, is left as it is.
"""

from __future__ import annotations

import torch

from executorch_trt.graph.edit import EDGE, insert_before, is_static

MEAN = EDGE.aten.mean.dim
#: What the new nodes inherit from the mean they replace (where in the model it came from).
_PROVENANCE = ("nn_module_stack", "stack_trace", "source_fn_stack")


def _rewritable(node: torch.fx.Node) -> bool:
    """A float32 ``mean.dim`` of a 3-D value over its last dimension, keepdim, no dtype, with
    at most one dynamic leading dimension (``view_copy`` infers one size at most)."""
    if node.op != "call_function" or node.target != MEAN or node.kwargs.get("dtype"):
        return False
    source, dims = node.args[0], node.args[1]
    keepdim = len(node.args) > 2 and bool(node.args[2])
    if not isinstance(source, torch.fx.Node) or "val" not in source.meta or not keepdim:
        return False
    value = source.meta["val"]
    if value.dim() != 3 or value.dtype != torch.float32:
        return False
    if not isinstance(dims, (list, tuple)) or list(dims) not in ([-1], [2]):
        return False
    return sum(not is_static(d) for d in value.shape[:2]) <= 1


def mean_as_pooling(graph_module: torch.fx.GraphModule) -> int:
    """Rewrites each rewritable ``mean.dim`` in ``graph_module``'s top-level graph (module
    docstring); returns how many."""
    rewritten = 0
    for node in list(graph_module.graph.nodes):
        if not _rewritable(node):
            continue
        source = node.args[0]
        assert isinstance(source, torch.fx.Node)
        wide = insert_before(node, EDGE.aten.unsqueeze_copy.default, (source, -1))
        pooled = insert_before(node, EDGE.aten.mean.dim, (wide, [2, 3], True))
        leading = [d if is_static(d) else -1 for d in source.meta["val"].shape[:2]]
        with graph_module.graph.inserting_before(node):
            mean = graph_module.graph.call_function(
                EDGE.aten.view_copy.default, (pooled, [*leading, 1])
            )
        # Set, not computed: inferring the -1 would specialise a dynamic size (graph.edit).
        mean.meta["val"] = node.meta["val"]
        for new in (wide, pooled, mean):
            for key in _PROVENANCE:
                if key in node.meta:
                    new.meta[key] = node.meta[key]
        node.replace_all_uses_with(mean)
        graph_module.graph.erase_node(node)
        rewritten += 1
    if rewritten:
        graph_module.recompile()
    return rewritten
