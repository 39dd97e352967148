"""``KVCacheUpdatePass``: rewrites every supported KV-cache write into
``executorch_trt.kv_cache_update``, with PyTorch's exact semantics.

The write forms, as they reach a partition after ``to_edge`` (run ``FunctionalCopyPass``
first, so ``cache[...] = v`` and ``narrow(...).copy_(v)`` no longer read ``cache`` through a
functional ``copy``)::

    index_copy(cache, dim, idx, v)               # cache.index_copy_(dim, idx, v)
    index_put(cache, [None]*dim + [idx], v)      # cache[:, :, idx] = v  (idx a tensor)
    slice_scatter(cache, v, dim, start, end, step)   # cache[:, :, a:b] = v, narrow().copy_()
    select_scatter(cache, v, dim, i)             # cache[:, :, i] = v    (i a Python int)
    update_cross_attn_cache(v, cache)            # cache[:, :, :S] = v   (outside a cond)
  ->
    kv_cache_update(cache, v', idx', dim)

* ``index_copy``: ``v`` must have the cache's shape with ``len(idx)`` rows at ``dim`` and
  ``idx`` must be 1-D int64, as eager requires; out-of-range or negative indices fail at run
  time (the kernel's error), as eager raises ``IndexError``.
* ``index_put`` (``accumulate=False``, every index before ``dim`` a full slice, one index
  tensor of any rank, int64 or int32, with at most one dynamic dimension: a prefill's ``[T]``
  positions): ``v`` broadcasts to the indexed shape (size-1 or
  missing leading dimensions, as slice assignment produces), so ``v'`` is ``v`` expanded to it;
  ``idx'`` is ``idx`` flattened, converted to int64, with negative entries wrapped (``where(idx < 0,
  idx + size, idx)``), as ``index_put`` does. Entries outside ``[-size, size)`` still fail at run
  time.
* ``slice_scatter`` / ``select_scatter`` with static bounds: ``idx'`` is the ``arange`` of the
  slice (``start``/``end`` normalised and clamped as Python slicing does), ``v'`` the source
  (``select_scatter``'s gets its ``dim`` back as a size-1 dimension).

The rewrite keeps the write node (its name is the partition output's binding name) and only
changes its op and arguments. Whether a rewritten write is then *aliased* (updated in place) is
decided separately by ``executorch_trt.backend.bindings.decide_aliases``.

``match_kv_write(node)`` is the single recogniser: it returns a ``KVWrite`` for a supported form,
a reason string for a write-like op it cannot take (used in export warnings), or ``None``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import PassBase, PassResult
from torch.fx.experimental.symbolic_shapes import statically_known_true

from executorch_trt.graph.edit import EDGE, cast_to, insert_before, reshape_to, view_as
from executorch_trt.graph.nodes import args_of
from executorch_trt.graph.operator_support import schema_name
from executorch_trt.ops import kv_cache_update as _ops  # noqa: F401

KV_CACHE_UPDATE = exir_ops.edge.executorch_trt.kv_cache_update.default

#: Schema names of the ops this pass recognises as KV writes.
WRITE_OPS = (
    "aten::index_copy",
    "aten::index_put",
    "aten::slice_scatter",
    "aten::select_scatter",
    "aten::index_fill",
)
#: How ``docs/guide/cache_writes.md`` and warnings name the supported forms.
SUPPORTED_FORMS = (
    "index_copy_ on any dimension",
    "index_put_ / cache[..., idx] = v with leading full slices",
    "slice assignment / narrow().copy_() with static bounds",
    "cache[..., i] = v with a static int",
    "index_fill_",
    "executorch::update_cross_attn_cache outside a torch.cond",
)

_INDEX_DTYPES = (torch.int64, torch.int32)
#: ExecuTorch's cross-attention cache write (``cross_attn_ops``); outside a ``torch.cond``
#: it is the write ``cache[:, :, :S] = value``.
CROSS_ATTN_UPDATE = "executorch::update_cross_attn_cache"


@dataclasses.dataclass(frozen=True)
class KVWrite:
    """A recognised write: ``node`` computes ``cache`` with rows ``rows`` along ``dim``
    replaced. ``form`` is the op's schema name."""

    node: torch.fx.Node
    cache: torch.fx.Node
    dim: int
    form: str


def _val(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _static_ints(*values: object) -> bool:
    return all(v is None or isinstance(v, int) for v in values)


def match_kv_write(node: torch.fx.Node) -> KVWrite | str | None:
    """Classifies ``node``: a ``KVWrite`` if it is a supported write form, a reason string if
    it is one of ``WRITE_OPS`` in a form the delegate cannot update in place, else ``None``."""
    if node.op != "call_function":
        return None
    name = schema_name(node)
    if name == CROSS_ATTN_UPDATE:
        return _match_cross_attn_update(node)
    if name not in WRITE_OPS:
        return None
    args = args_of(node)
    cache = args[0]
    c = _val(cache)
    if c is None or c.dim() == 0:
        return f"{name} of a non-tensor or 0-d target"
    if any(not isinstance(d, int) for d in c.shape):
        return f"{name} of a cache with a dynamic shape {list(c.shape)}"
    if name == "aten::index_copy":
        return _match_index_copy(node, cache, c)
    if name == "aten::index_put":
        return _match_index_put(node, cache, c)
    if name == "aten::index_fill":
        _, dim, idx, fill = args[:4]
        i = _val(idx)
        if i is None or i.dim() > 1 or i.dtype not in _INDEX_DTYPES:
            return "index_fill with an index that is not a 0-d or 1-D int64/int32 tensor"
        if any(not isinstance(d, int) for d in i.shape):
            return "index_fill with an index of dynamic length"
        if isinstance(fill, torch.fx.Node):
            f = _val(fill)
            if f is None or f.dim() != 0:
                return "index_fill with a non-scalar fill value"
        return KVWrite(node, cache, dim % c.dim(), name)
    if name == "aten::slice_scatter":
        _, src, dim, start, end, step = _slice_scatter_args(node)
        if not _static_ints(dim, start, end, step):
            return "slice_scatter with symbolic bounds (only static start/end/step are in place)"
        dim = dim % c.dim()
        expected = list(c.shape)
        expected[dim] = len(range(*slice(start, end, step).indices(int(c.shape[dim]))))
        return _check_source(node, cache, c, src, dim, expected, name)
    _, src, dim, index = args[:4]
    if not _static_ints(dim, index):
        return "select_scatter with a symbolic index"
    dim = dim % c.dim()
    expected = list(c.shape[:dim]) + list(c.shape[dim + 1 :])
    return _check_source(node, cache, c, src, dim, expected, name)


def _match_cross_attn_update(node: torch.fx.Node) -> KVWrite | str:
    """``update_cross_attn_cache(value, cache)`` outside a ``cond``: ``cache[:, :, :S] = value``
    (``value`` ``[B, H, S, D]``, ``S <= S_max``; ``S`` may be dynamic)."""
    value, cache = args_of(node)[:2]
    c, v = _val(cache), _val(value)
    if c is None or v is None or c.dim() != 4 or v.dim() != 4:
        return "update_cross_attn_cache of a value or cache that is not a 4-D tensor"
    if any(not isinstance(d, int) for d in c.shape):
        return f"update_cross_attn_cache of a cache with a dynamic shape {list(c.shape)}"
    if v.dtype != c.dtype or any(
        not isinstance(v.shape[d], int) or v.shape[d] != c.shape[d] for d in (0, 1, 3)
    ):
        return (
            f"update_cross_attn_cache of a {v.dtype} {list(v.shape)} value into a "
            f"{c.dtype} {list(c.shape)} cache"
        )
    return KVWrite(node, cache, 2, CROSS_ATTN_UPDATE)


def _slice_scatter_args(node: torch.fx.Node) -> list[Any]:
    """``[self, src, dim, start, end, step]`` of a ``slice_scatter`` node, defaults filled in
    from its schema (``dim=0, start=None, end=None, step=1``)."""
    names = ("self", "src", "dim", "start", "end", "step")
    defaults = (None, None, 0, None, None, 1)
    args = list(node.args) + list(defaults[len(node.args) :])
    return [node.kwargs.get(n, a) for n, a in zip(names, args)]


def _check_source(
    node: torch.fx.Node,
    cache: torch.fx.Node,
    c: torch.Tensor,
    src: Any,
    dim: int,
    expected: list[int],
    name: str,
) -> KVWrite | str:
    s = _val(src)
    if s is None or list(s.shape) != expected or s.dtype != c.dtype:
        got = f"{s.dtype} {list(s.shape)}" if s is not None else "a non-tensor"
        return (
            f"{name.split('::')[1]} of {got} into a {c.dtype} {list(c.shape)} cache "
            f"(expected {c.dtype} {expected})"
        )
    return KVWrite(node, cache, dim, name)


#: ``node.meta`` key a rewritten scatter carries when it writes back a view of its own cache
#: (``VIEW_COPY_BYTES``: bytes of that view copied out and back per call).
VIEW_COPY_BYTES = "executorch_trt_view_copy_bytes"
_VIEWS = {"aten::select_scatter": "aten::select_copy", "aten::slice_scatter": "aten::slice_copy"}


def _view_copy_bytes(node: torch.fx.Node, cache: torch.fx.Node, src: torch.fx.Node) -> int:
    """Bytes of ``src`` when it is computed from the very view of ``cache`` that scatter
    ``node`` writes back (``cache[0].index_copy_(1, pos, x)``, ``cache[..., :32] = v``:
    functionalisation copies the view out, updates the copy and scatters it back), else 0."""
    view_op = _VIEWS[schema_name(node)]
    view_args = list(node.args[2:])
    seen, stack = set(), [src]
    while stack:
        n = stack.pop()
        if not isinstance(n, torch.fx.Node) or n in seen:
            continue
        seen.add(n)
        if (
            n.op == "call_function"
            and schema_name(n) == view_op
            and n.args[0] is cache
            and list(n.args[1:]) == view_args[: len(n.args) - 1]
        ):
            s = cast(torch.Tensor, _val(src))  # the scatter's checked source
            return s.numel() * s.element_size()
        stack.extend(n.all_input_nodes)
    return 0


def _match_index_copy(node: torch.fx.Node, cache: torch.fx.Node, c: torch.Tensor) -> KVWrite | str:
    _, dim, idx, value = args_of(node)[:4]
    i, v = _val(idx), _val(value)
    if i is None or v is None:
        return "index_copy with a non-tensor index or value"
    if i.dim() > 1 or i.dtype != torch.int64:
        return f"index_copy with a {i.dim()}-D {i.dtype} index (0-d or 1-D int64 expected)"
    dim = dim % c.dim()
    expected = list(c.shape)
    expected[dim] = i.numel()
    if list(v.shape) != expected or v.dtype != c.dtype:
        return (
            f"index_copy of a {v.dtype} {list(v.shape)} value into a {c.dtype} "
            f"{list(c.shape)} cache (expected {c.dtype} {expected})"
        )
    return KVWrite(node, cache, dim, "aten::index_copy")


def _indexed_shape(c: torch.Tensor, dim: int, i: torch.Tensor) -> list[int]:
    """Shape of ``cache[(slice(None),) * dim + (idx,)]``: the index's dims replace ``dim``."""
    return list(c.shape[:dim]) + list(i.shape) + list(c.shape[dim + 1 :])


def _match_index_put(node: torch.fx.Node, cache: torch.fx.Node, c: torch.Tensor) -> KVWrite | str:
    args = args_of(node)
    indices, value = args[1], args[2]
    accumulate = args[3] if len(args) > 3 else node.kwargs.get("accumulate", False)
    if accumulate:
        return "index_put with accumulate=True (an add, not a write)"
    if not isinstance(indices, (list, tuple)) or not indices:
        return "index_put without indices"
    tensors = [k for k, ix in enumerate(indices) if ix is not None]
    if len(tensors) != 1 or tensors[0] != len(indices) - 1:
        return (
            "index_put with several index tensors or an index after a tensor index "
            "(only cache[:, ..., idx] = v is in place)"
        )
    dim = tensors[0]
    i, v = _val(indices[dim]), _val(value)
    if i is None or v is None:
        return "index_put with a non-tensor index or value"
    if i.dtype not in _INDEX_DTYPES:
        return f"index_put with a {i.dtype} index (boolean masks are not in place)"
    if sum(not isinstance(d, int) for d in i.shape) > 1:
        return "index_put with an index of more than one dynamic dimension"
    if v.dtype != c.dtype:
        return f"index_put of a {v.dtype} value into a {c.dtype} cache"
    target = _indexed_shape(c, dim, i)
    if not _broadcasts(list(v.shape), target):
        return f"index_put value {list(v.shape)} does not broadcast to {target}"
    return KVWrite(node, cache, dim, "aten::index_put")


def _broadcasts(shape: list[Any], target: list[Any]) -> bool:
    """Whether ``shape`` broadcasts to ``target``, where a dynamic size (``SymInt``) must be
    the target's own size there. Decided with ``statically_known_true`` only: comparing with
    ``==`` would install a guard that specialises the dynamic size (``graph.edit.same_shape``)."""
    if len(shape) > len(target):
        return False
    for have, want in zip(reversed(shape), reversed(target)):
        if isinstance(have, int) and have == 1:
            continue
        if not statically_known_true(have == want):
            return False
    return True


def _wrapped(anchor: torch.fx.Node, idx: torch.fx.Node, size: int) -> torch.fx.Node:
    """``where(idx < 0, idx + size, idx)`` before ``anchor``: negative indices wrapped as
    ``index_put`` / ``index_fill`` do (entries outside ``[-size, size)`` still fail in the
    kernel, as eager raises)."""
    negative = insert_before(anchor, EDGE.aten.lt.Scalar, (idx, 0))
    shifted = insert_before(anchor, EDGE.aten.add.Scalar, (idx, size))
    return insert_before(anchor, EDGE.aten.where.self, (negative, shifted, idx))


def _rewrite(write: KVWrite) -> None:
    """Turns ``write.node`` into ``kv_cache_update(cache, value, indices, dim)`` (module
    docstring), inserting the value/index adjustments before it."""
    node, c, dim = write.node, write.cache.meta["val"], write.dim
    args = args_of(node)
    size = int(c.shape[dim])
    if write.form == "aten::index_copy":
        _, _, idx, value = args[:4]
        idx = view_as(node, idx, [idx.meta["val"].numel()])
    elif write.form == "aten::index_fill":
        _, _, idx, fill = args[:4]
        rows = [idx.meta["val"].numel()]
        shape = list(c.shape[:dim]) + rows + list(c.shape[dim + 1 :])
        if isinstance(fill, torch.fx.Node):  # a 0-d tensor: broadcast it to the rows
            value = reshape_to(node, cast_to(node, fill, c.dtype), shape, sizes_from=[idx])
        else:
            value = insert_before(node, EDGE.aten.full.default, (shape, fill), {"dtype": c.dtype})
        idx = _wrapped(node, cast_to(node, view_as(node, idx, rows), torch.int64), size)
    elif write.form == "aten::index_put":
        idx, value = args[1][dim], args[2]
        i = idx.meta["val"]
        value = reshape_to(node, value, _indexed_shape(c, dim, i), sizes_from=[idx])
        rows = [i.numel()]
        value = view_as(node, value, list(c.shape[:dim]) + rows + list(c.shape[dim + 1 :]))
        # The op takes int64 indices (ops/kv_cache_update.py); index_put also accepts int32.
        idx = _wrapped(node, cast_to(node, view_as(node, idx, rows), torch.int64), size)
    elif write.form == CROSS_ATTN_UPDATE:
        value = args[0]
        rows = value.meta["val"].shape[2]
        if not isinstance(rows, int):  # a dynamic S: its size, read off the value at run time
            with node.graph.inserting_before(node):
                length = node.graph.call_function(torch.ops.aten.sym_size.int, (value, 2))
            # Set, not computed: calling sym_size on the fake value would specialise S.
            length.meta["val"] = rows
            with node.graph.inserting_before(node):
                idx = node.graph.call_function(
                    EDGE.aten.arange.start_step, (0, length, 1), {"dtype": torch.int64}
                )
            with value.meta["val"].fake_mode:  # no tensor argument to find the mode from
                idx.meta["val"] = torch.arange(0, rows, 1, dtype=torch.int64)
        else:
            idx = insert_before(
                node, EDGE.aten.arange.start_step, (0, rows, 1), {"dtype": torch.int64}
            )
    elif write.form == "aten::slice_scatter":
        _, value, _, start, end, step = _slice_scatter_args(node)
        start, end, step = slice(start, end, step).indices(size)
        idx = insert_before(
            node, EDGE.aten.arange.start_step, (start, end, step), {"dtype": torch.int64}
        )
    else:  # select_scatter
        _, value, _, index = args[:4]
        index = index % size if -size <= index < size else index
        shape = list(c.shape)
        shape[dim] = 1
        value = view_as(node, value, shape)
        idx = insert_before(
            node, EDGE.aten.arange.start_step, (index, index + 1, 1), {"dtype": torch.int64}
        )
    if write.form in _VIEWS:
        node.meta[VIEW_COPY_BYTES] = _view_copy_bytes(node, write.cache, args[1])
    node.target = KV_CACHE_UPDATE
    node.args = (write.cache, value, idx, dim)
    node.kwargs = {}


def _as_index_put(node: torch.fx.Node) -> bool:
    """``index_copy(x, dim, idx, v)`` that is not a supported write, as PyTorch decomposes it:
    ``index_put(x, [None] * dim + [idx], v)``. ExecuTorch ships no ``index_copy`` kernel, and
    the partitioner keeps the op from being decomposed (to recognise KV writes), so an
    unrecognised one must not reach the nested program as it is."""
    x, dim, idx, value = args_of(node)[:4]
    rank = x.meta["val"].dim()
    node.target = EDGE.aten.index_put.default
    node.args = (x, [None] * (dim % rank) + [idx], value)
    node.kwargs = {}
    return True


class KVCacheUpdatePass(PassBase):
    """Rewrites each ``match_kv_write`` match into ``executorch_trt.kv_cache_update``
    (see module docstring). Operates on a partition's graph module in place; write-like ops it
    cannot take are left as they are (ExecuTorch's write-back keeps them correct)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            write = match_kv_write(node)
            if isinstance(write, KVWrite):
                _rewrite(write)
                modified = True
            elif isinstance(write, str) and schema_name(node) == "aten::index_copy":
                modified |= _as_index_put(node)
        if modified:
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)
