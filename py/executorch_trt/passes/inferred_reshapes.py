"""``reshapes_as_inferred_views``: reshapes of a dynamic value in the form ExecuTorch's XNNPACK
partitioner takes, in the portable engine's nested program.

With a dynamic sequence length (``export_llm``'s one ``forward``), ``torch.export`` writes each
reshape's dynamic size as a ``sym_size`` node: ``q.view(1, T, 9, 64)``. The XNNPACK partitioner
refuses a ``view_copy`` with a symbolic size (``ViewCopyConfig``: "Symbolic reshape is not
supported") and an ``unsqueeze_copy`` other than on the trailing dimension
(``UnsqueezeCopyConfig``), so each one stays on ExecuTorch's portable kernel and cuts the
XNNPACK subgraph around it: on SmolLM-135M's shape, 122 XNNPACK subgraphs instead of about one
per layer, each a delegate call per token and a preprocess at export. XNNPACK's reshape infers
one size from the element count (a ``-1``), which is what these reshapes mean. Each one in the
top-level graph whose result has at most one dynamic size is rewritten::

    view_copy(x, [1, sym_size(x, 1), 9, 64])  ->  view_copy(x, [1, -1, 9, 64])
    unsqueeze_copy(x[1, T, 64], 1)            ->  view_copy(x, [1, 1, -1, 64])

The result has the same elements in the same order (a reshape of a contiguous value). A
reshape with two dynamic sizes, or with a static size 0 beside a dynamic one (nothing to infer
from), is left as it is.
"""

from __future__ import annotations

import torch

from executorch_trt.graph.edit import EDGE, is_static, shape_argument

VIEW = EDGE.aten.view_copy.default
UNSQUEEZE = EDGE.aten.unsqueeze_copy.default


def _sizes(view: torch.fx.Node) -> list[object]:
    """The size list of ``view_copy`` node ``view`` (ints and ``sym_size`` nodes)."""
    sizes = view.args[1]
    return list(sizes) if isinstance(sizes, (list, tuple)) else []


def _new_shape(node: torch.fx.Node) -> list[int] | None:
    """The ``view_copy`` size list ``node`` becomes, or ``None`` to leave it (docstring)."""
    if node.op != "call_function" or node.target not in (VIEW, UNSQUEEZE):
        return None
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    shape = list(value.shape)
    dynamic = [d for d in shape if not is_static(d)]
    if len(dynamic) > 1 or (dynamic and 0 in shape):
        return None
    if node.target == VIEW and all(isinstance(d, int) for d in _sizes(node)):
        return None  # already XNNPACK's form (static, or one size inferred)
    if node.target == UNSQUEEZE and not dynamic:
        return None  # a static unsqueeze: the partitioner decides (trailing dimension only)
    return shape_argument(shape, node.name)


def reshapes_as_inferred_views(graph_module: torch.fx.GraphModule) -> int:
    """Rewrites each reshape of ``graph_module``'s top-level graph that the module docstring
    names; returns how many. A ``sym_size`` node left without users is removed."""
    rewritten = 0
    for node in list(graph_module.graph.nodes):
        shape = _new_shape(node)
        if shape is None:
            continue
        old_sizes = _sizes(node) if node.target == VIEW else []
        node.target = VIEW
        node.args = (node.args[0], shape)
        # meta["val"] is kept, not recomputed: inferring the -1 would specialise the size.
        for size in old_sizes:
            if isinstance(size, torch.fx.Node) and not size.users:
                graph_module.graph.erase_node(size)
        rewritten += 1
    if rewritten:
        graph_module.recompile()
    return rewritten
