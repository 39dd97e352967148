"""``DropNoOpCopiesPass``: removes copies that change nothing from a partition's graph.

``to_edge`` leaves copies whose result equals their operand: a ``repeat_kv``/mask
``expand_copy`` to the shape the tensor already has (17 of the 25 ``expand_copy`` of a decode
step of the benchmark's Llama), a ``clone``/``_clone_dim_order`` or a
``_to_copy``/``_to_dim_order_copy`` to the dtype and dim order it already has. Each still copies
its whole operand on every call. Graph shape rewritten (one partition, top-level graph)::

    y = expand_copy(x, x.shape)          # or view_copy / slice_copy / squeeze_copy /
    z = f(y)                             # unsqueeze_copy to x's own shape; clone(x),
  ->                                     # _to_copy(x) / _clone_dim_order(x) /
    z = f(x)                             # _to_dim_order_copy(x) / alias_copy(x) with x's dtype
                                         # and dim order

A copy is a no-op when its output's ``meta["val"]`` has the input's shape, dtype, device and
dim order (``torch.Tensor.dim_order``) and the op is one whose result then *is* its operand:
every op of ``_ALWAYS_IDENTITY``, and the ops of ``_IDENTITY_IF_SAME_SHAPE`` (for those, an
equal shape means a full-range slice, a broadcast to the same shape, a same-shape view, a
squeeze or unsqueeze of nothing). ``permute_copy``/``transpose_copy`` are never dropped (a
permutation can keep the shape and still move elements).

A copy is kept, even when it is a no-op:

* when its result is a partition output: the output node's name is the binding name the
  delegate metadata and the partitioner's ``buffer_updates`` refer to, and an output that is
  another value (or a partition input) would change the engine's bindings;
* when its operand or its result is storage that is written in place at run time, or an alias
  of it (``_WRITES_IN_PLACE``: ``executorch_trt::kv_cache_update``'s operands and result,
  ExecuTorch's ``update_cross_attn_cache``/``alias`` and a ``torch.cond`` with their
  ``getitem``s): there the copy is a snapshot (reading the old cache after the write) or keeps
  the write off the operand, as the eager program's ``clone`` did;
* inside a ``torch.cond`` branch (branches are left as they are: their outputs are planned in
  place by ``cross_attn_cache.plan_cond_caches_in_place``).

Run on the partition after ``KVCacheUpdatePass`` (``backend.analyse_partition``), before the
engine builds. Numerics are unchanged by construction: every dropped node's value equals its
operand's.
"""

from __future__ import annotations

import operator

import torch
from executorch.exir.pass_base import PassBase, PassResult

from executorch_trt.graph.edit import same_shape
from executorch_trt.graph.operator_support import is_cond, schema_name

#: Copies whose result equals the operand whenever dtype, shape and dim order are unchanged.
_ALWAYS_IDENTITY = frozenset(
    {
        "aten::clone",
        "aten::_to_copy",
        "aten::alias_copy",
        "dim_order_ops::_to_dim_order_copy",
        "dim_order_ops::_clone_dim_order",
    }
)
#: Shape ops whose result equals the operand when the shape is unchanged (module docstring).
_IDENTITY_IF_SAME_SHAPE = frozenset(
    {
        "aten::expand_copy",
        "aten::view_copy",
        "aten::slice_copy",
        "aten::squeeze_copy",
        "aten::unsqueeze_copy",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::view",
        "aten::expand",
    }
)
NOOP_CANDIDATES = _ALWAYS_IDENTITY | _IDENTITY_IF_SAME_SHAPE

#: Ops whose operands (or results) are written in place at run time (module docstring).
_WRITES_IN_PLACE = frozenset(
    {
        "executorch_trt::kv_cache_update",
        "executorch::update_cross_attn_cache",
        "executorch::alias",
    }
)


def _same_tensor_layout(a: object, b: object) -> bool:
    """Whether two ``meta["val"]`` fake tensors have one shape, dtype, device and dim order."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if not same_shape(a.shape, b.shape) or a.dtype != b.dtype or a.device != b.device:
        return False
    try:
        return tuple(a.dim_order()) == tuple(b.dim_order())
    except (RuntimeError, ValueError, AttributeError):  # ambiguous strides: not provably equal
        return same_shape(a.stride(), b.stride())


def _in_place_storage(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose storage is written in place at run time, or aliases such storage: every
    tensor operand and the result (with its ``getitem``s) of each ``_WRITES_IN_PLACE`` op and
    ``torch.cond``."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op != "call_function" or not (
            is_cond(node) or schema_name(node) in _WRITES_IN_PLACE
        ):
            continue
        found.add(node)
        found.update(u for u in node.users if u.target is operator.getitem)
        found.update(node.all_input_nodes)
    return found


def is_noop_copy(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a copy whose result equals its first operand (module docstring);
    says nothing about whether dropping it is safe (``DropNoOpCopiesPass`` checks that)."""
    if node.op != "call_function":
        return False
    name = schema_name(node)
    if name not in NOOP_CANDIDATES or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    return _same_tensor_layout(node.args[0].meta.get("val"), node.meta.get("val"))


class DropNoOpCopiesPass(PassBase):
    """Applies the rewrite in the module docstring to a partition's graph module in place.
    ``dropped`` counts the nodes removed by the last call (by schema name)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: dict[str, int] = {}

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        in_place = _in_place_storage(graph)
        self.dropped = {}
        for node in list(graph.nodes):
            if not is_noop_copy(node):
                continue
            source = node.args[0]
            if source in in_place or node in in_place or any(u.op == "output" for u in node.users):
                continue
            node.replace_all_uses_with(source)
            graph.erase_node(node)
            name = schema_name(node)
            self.dropped[name] = self.dropped.get(name, 0) + 1
        if self.dropped:
            graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, bool(self.dropped))
