"""``pin_sdpa_layout``: makes an exported graph independent of the memory layout of
``aten.scaled_dot_product_attention``'s result, so the partitioner can keep SDPA whole for
several query rows (prefill) too.

Why: on the CPU, ``torch.export`` traces SDPA with several query rows through the flash
kernel, whose ``[B, H, T, D]`` result is laid out as ``[B, T, H, D]`` (strides
``(T*H*D, D, H*D, 1)``). ``transformers`` then transposes it to ``[B, T, H, D]`` and ``view``s
it to ``[B, T, H*D]``, which that layout allows without a copy, so the graph records a plain
``view``. Kept whole by the partitioner (``ops_to_not_decompose``), SDPA is re-traced by
ExecuTorch with a *contiguous* result, and the recorded ``view`` of its transpose fails
("Cannot view a tensor with shape ... and strides ..."); so until this pass only SDPA calls
with a contiguous exported result (one query row: decode) were kept, and prefill attention ran
decomposed: a ``repeat_kv`` copy of both caches and products over the whole capacity (the
benchmark's step time, and its memory at 4096 positions).

The pass rewrites each top-level SDPA whose exported result is not contiguous::

    o = scaled_dot_product_attention(...)
  ->
    o = transpose(clone(transpose(scaled_dot_product_attention(...), 1, 2),
                        memory_format=contiguous), 1, 2)

which has the flash kernel's layout whatever layout SDPA produces, so every recorded ``view``
after it stays valid when SDPA is re-traced. On ExecuTorch's runtime tensors are contiguous and
these are two ``permute_copy`` and a ``clone`` of the attention output (``T * H * D`` elements
per layer and call, against the ``2 * S * H * D`` of ``repeat_kv``). ``is_layout_pinned``
recognises the rewritten pattern (ExecuTorch turns the transposes into ``permute``s before the
partitioner sees the graph).
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from executorch_trt.graph.nodes import args_of, copy_provenance

aten = torch.ops.aten
SDPA_OP = aten.scaled_dot_product_attention.default
_SWAP_1_2 = [0, 2, 1, 3]


def _is_swap_1_2(node: torch.fx.Node) -> bool:
    """``transpose(x, 1, 2)`` (or ``-3, -2``) or ``permute(x, [0, 2, 1, 3])`` of a 4-D ``x``."""
    if node.op != "call_function":
        return False
    if node.target is aten.permute.default:
        return list(args_of(node)[1]) == _SWAP_1_2
    if node.target is aten.transpose.int:
        return sorted(d % 4 for d in args_of(node)[1:3]) == [1, 2]
    return False


def is_layout_pinned(sdpa: torch.fx.Node) -> bool:
    """Whether ``sdpa``'s only use is ``pin_sdpa_layout``'s transpose -> contiguous clone ->
    transpose, i.e. nothing after it depends on the layout of its result."""
    users = list(sdpa.users)
    if len(users) != 1 or not _is_swap_1_2(users[0]):
        return False
    clones = list(users[0].users)
    if (
        len(clones) != 1
        or clones[0].target is not aten.clone.default
        or clones[0].kwargs.get("memory_format") is not torch.contiguous_format
    ):
        return False
    back = list(clones[0].users)
    return len(back) == 1 and _is_swap_1_2(back[0])


def pin_sdpa_layout(ep: ExportedProgram) -> int:
    """Rewrites, in place, every top-level SDPA of ``ep`` whose exported result is not
    contiguous (module docstring); returns how many. Idempotent (a pinned SDPA is left alone).
    Control-flow branches are left alone: SDPA there is decomposed anyway
    (``partitioner.ops_to_not_decompose``)."""
    graph = ep.graph_module.graph
    count = 0
    for node in list(graph.nodes):
        val = node.meta.get("val")
        if (
            node.target is not SDPA_OP
            or not isinstance(val, torch.Tensor)
            or val.dim() != 4
            or val.is_contiguous()
            or is_layout_pinned(node)
        ):
            continue
        users = list(node.users)
        with graph.inserting_after(node):
            swapped = graph.call_function(aten.transpose.int, (node, 1, 2))
        with graph.inserting_after(swapped):
            packed = graph.call_function(
                aten.clone.default, (swapped,), {"memory_format": torch.contiguous_format}
            )
        with graph.inserting_after(packed):
            restored = graph.call_function(aten.transpose.int, (packed, 1, 2))
        # Fake values for the next trace; source metadata so errors point at the attention.
        swapped.meta["val"] = val.transpose(1, 2)
        packed.meta["val"] = swapped.meta["val"].clone(memory_format=torch.contiguous_format)
        restored.meta["val"] = packed.meta["val"].transpose(1, 2)
        copy_provenance(node, swapped, packed, restored)
        for user in users:
            user.replace_input_with(node, restored)
        count += 1
    if count:
        ep.graph_module.recompile()
    return count
