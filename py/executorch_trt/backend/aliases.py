"""The in-place alias decision of one partition: which outputs update an input in place.

``decide_aliases`` is the single place that decides it (the contract's "In place" rule); the
decision is carried in the blob (``aliased_io``) and never re-derived: the runtime binds each
aliased output to its input's storage, and the memory planner gives the two one value.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import cast

import torch

from executorch_trt.backend.bindings import BindingContract
from executorch_trt.format.blob import AliasedIO
from executorch_trt.format.wire import ALIAS_KV_CACHE_UPDATE, ALIAS_USER, OWNERSHIP_CALLER
from executorch_trt.graph.nodes import arg_node, arg_nodes
from executorch_trt.graph.operator_support import is_cond, op_name, schema_name
from executorch_trt.options import KV_CACHE_INPLACE, CompileOptions
from executorch_trt.passes.cross_attn_cache import cond_cache_outputs
from executorch_trt.passes.kv_cache_writes import KV_CACHE_UPDATE, VIEW_COPY_BYTES, match_kv_write


@dataclasses.dataclass(frozen=True)
class AliasDecision:
    """Which buffer updates of one partition are in place, and why the others are not.

    * ``aliases``: the ``AliasedIO`` entries for the blob, in output order.
    * ``not_in_place``: ``{output name: reason}`` for every buffer update (a
      ``CompileOptions.buffer_updates`` output) that is *not* aliased; ExecuTorch copies those
      back. The reasons are for people (export warnings, ``inspect``), not for the runtime.
    """

    aliases: tuple[AliasedIO, ...]
    not_in_place: dict[str, str]
    #: ``{output name: bytes}`` for aliased updates that write back a *view* of their buffer
    #: (``KVCacheUpdatePass.VIEW_COPY_BYTES``): in place at the program level, but the engine
    #: copies that view out and back on every call.
    view_copies: dict[str, int] = dataclasses.field(default_factory=dict)


def _memory_readers(node: torch.fx.Node) -> list[torch.fx.Node]:
    """Nodes that read ``node``'s memory: its users, and through ``view_copy`` (which
    ExecuTorch turns into a view of the same memory) the users of those views."""
    readers, stack = [], list(node.users)
    while stack:
        user = stack.pop()
        readers.append(user)
        if user.op == "call_function" and schema_name(user) == "aten::view_copy":
            stack.extend(user.users)
    return readers


def _ancestors(node: torch.fx.Node) -> set[torch.fx.Node]:
    seen, stack = set(), list(node.all_input_nodes)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return seen


def _memory_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose memory ``node`` is: itself, or through ``view_copy`` (a view of the same
    memory once ExecuTorch plans it) the node it views."""
    while node.op == "call_function" and schema_name(node) == "aten::view_copy":
        node = arg_node(node, 0)
    return node


def _kv_operand_blocker(out: torch.fx.Node, cache: torch.fx.Node) -> str | None:
    """Why ``out = kv_cache_update(cache, value, indices, dim)`` cannot write ``cache`` in
    place because an operand *is* the cache's memory, or ``None``.

    In place, the engine reads ``value`` (and ``indices``) while it writes the cache; when they
    are the cache itself (``cache.index_copy(2, perm, cache)``: a rotation, or a source that
    compiled to nothing such as ``cache.float()`` of a float cache), rows it has already
    written would be read back. Eager computes the new cache out of place."""
    for operand in (arg_node(out, 1), arg_node(out, 2)):
        if _memory_root(operand) is cache:
            return (
                f"the update reads the buffer's own memory ({operand.name}) while it writes "
                "it, so an in-place write would read rows it has already overwritten"
            )
    return None


def _kv_alias_blocker(out: torch.fx.Node, cache: torch.fx.Node) -> str | None:
    """Why ``out = kv_cache_update(cache, ...)`` cannot write ``cache`` in place, or ``None``.

    Safe exactly when every other reader of the cache's memory runs before the update on
    every engine, i.e. is an ancestor of ``out`` (data dependence orders it first; graph order
    alone does not bind TensorRT), and none of them is a partition output (a view of the old
    cache returned to the caller)."""
    before = _ancestors(out)
    for reader in _memory_readers(cache):
        if reader is out:
            continue
        if reader.op == "output":
            return "the old cache is also returned by the partition"
        if reader not in before:
            return (
                f"the old cache is also read by {op_name(reader)} ({reader.name}) inside "
                "the delegate, which does not feed the update, so an in-place write could "
                "change what it reads"
            )
    return None


def decide_aliases(contract: BindingContract, options: CompileOptions) -> AliasDecision:
    """Decides which outputs update an input in place (``docs/contract.md`` 2, "In place"), once,
    for the blob.

    Only a buffer update (``options.buffer_updates``: the output *is* the method's new value of
    the buffer that the input carries) can be aliased; any other output leaves its inputs
    untouched, as eager does. A buffer update is aliased when ``options.kv_cache`` is
    ``"inplace"``, the buffer is not also read outside the partition
    (``options.shared_inputs``), and either

    * the output is ``executorch_trt.kv_cache_update`` of that input, its value and indices
      are not the cache's own memory (``_kv_operand_blocker``) and no other op reads the old
      cache unless it feeds the update (``_kv_alias_blocker``): kind ``kv_cache_update``
      (the engine performs the aliasing update, and reports it); or
    * nothing in the partition reads the input at all (a full overwrite, e.g. the HF static
      cache's step counter after ``FunctionalCopyPass``): kind ``user`` (the exporter declares
      it; the runtime checks shape and dtype and binds the output to the input's storage).

    * the output is a ``torch.cond``'s output that both branches return as that input (a
      cross-attention cache, ``passes/cross_attn_cache.cond_cache_outputs``): kind ``user``
      (the engine's nested program writes the cache where it is bound). This alias is made
      whatever ``options.kv_cache`` says: under ``cond`` the update is correct only in place
      (a copy-back would bind the output to separate storage the reuse branch never
      writes), so an input that cannot be aliased raises ``ValueError``.

    Every other buffer update gets a reason in ``not_in_place``.
    """
    inputs = {n.name: n for n in contract.input_nodes}
    outputs = {n.name: n for n in contract.output_nodes if isinstance(n, torch.fx.Node)}
    shared = set(options.shared_inputs)
    aliases: list[AliasedIO] = []
    reasons: dict[str, str] = {}
    view_copies: dict[str, int] = {}
    for out_name, in_name in options.buffer_updates:
        out, inp = outputs.get(out_name), inputs.get(in_name)
        if out is None or inp is None:
            continue  # not this partition's binding (cannot happen for a partitioner's specs)
        if _cond_cache_operand(out) is inp:
            blocker = (
                "the buffer is also read outside the delegate"
                if in_name in shared
                else _kv_alias_blocker(out, inp)
            )
            if blocker is not None:
                raise ValueError(
                    f"TensorRTBackend: torch.cond output '{out_name}' updates cache '{in_name}', "
                    f"which cannot be updated in place: {blocker}. A cross-attention cache "
                    "under torch.cond must be read only through the cond's output."
                )
            aliases.append(AliasedIO(out_name, in_name, ALIAS_USER, OWNERSHIP_CALLER))
            continue
        if options.kv_cache != KV_CACHE_INPLACE:
            reasons[out_name] = f"kv_cache={options.kv_cache!r} was requested"
            continue
        if in_name in shared:
            reasons[out_name] = (
                "the buffer is also read outside the delegate, by an operator "
                "it does not take, which must see the old value"
            )
            continue
        if out.op == "call_function" and out.target == KV_CACHE_UPDATE and out.args[0] is inp:
            blocker = _kv_operand_blocker(out, inp) or _kv_alias_blocker(out, inp)
            if blocker is None:
                aliases.append(
                    AliasedIO(out_name, in_name, ALIAS_KV_CACHE_UPDATE, OWNERSHIP_CALLER)
                )
                if out.meta.get(VIEW_COPY_BYTES):
                    view_copies[out_name] = out.meta[VIEW_COPY_BYTES]
            else:
                reasons[out_name] = blocker
            continue
        if not inp.users and out.op == "call_function":
            aliases.append(AliasedIO(out_name, in_name, ALIAS_USER, OWNERSHIP_CALLER))
            continue
        reasons[out_name] = _not_a_write_reason(out, inp)
    order = {n.name: k for k, n in enumerate(contract.output_nodes)}
    aliases.sort(key=lambda a: order[a.output])
    return AliasDecision(tuple(aliases), reasons, view_copies)


def _cond_cache_operand(out: torch.fx.Node) -> torch.fx.Node | None:
    """The ``cond`` operand that output ``out`` is, when ``out`` is ``getitem(cond, j)`` and
    both branches return that operand as a cross-attention cache; else ``None``."""
    if out.op != "call_function" or out.target is not operator.getitem:
        return None
    cond, j = out.args
    if not isinstance(cond, torch.fx.Node) or not is_cond(cond):
        return None
    owner = cast(torch.fx.GraphModule, cond.graph.owning_module)
    k = cond_cache_outputs(owner, cond).get(cast(int, j))
    return None if k is None else arg_nodes(cond, 3)[k]


def _not_a_write_reason(out: torch.fx.Node, inp: torch.fx.Node) -> str:
    """Why buffer update ``out`` of input ``inp`` is not in place (``decide_aliases``)."""
    match = match_kv_write(out) if out.op == "call_function" else None
    if isinstance(match, str):
        return match
    if out.op == "call_function" and out.target == KV_CACHE_UPDATE:
        return (
            "the buffer is written more than once in this method (the last write updates "
            f"the result of {op_name(arg_node(out, 0))}, not the buffer); only a single write "
            "per method is in place"
        )
    if inp not in _ancestors(out):
        reader = next(iter(inp.users))
        return (
            f"the old value is also read by {op_name(reader)} ({reader.name}) inside the "
            "delegate, which does not feed the new value, so writing the new value into "
            "the buffer could change what it reads"
        )
    return (
        f"its new value is computed from the old one by {op_name(out)}, which is not a "
        "KV-cache write"
    )
