"""``make_copy_conversions_explicit``: the dtype conversion and broadcast of ``copy_`` made
explicit before functionalisation, so a buffer overwritten with ``copy_`` reads back what eager
reads.

Why: ``dst.copy_(src)`` converts ``src`` to ``dst``'s dtype and broadcasts it to ``dst``'s
shape. When ``dst`` is a whole tensor (``self.buf.copy_(x)``, ``self.buf[:] = x``), torch 2.13's
functionalisation (``run_decompositions``, which ``to_edge`` runs) replaces ``dst`` by ``src``
as it is: the rest of the method reads the unconverted, unbroadcast ``src`` (a float32 value
where eager reads float16, a ``[4]`` row where eager reads ``[3, 4]``), and the program returns
wrong numbers without an error. Plain ExecuTorch fails on the same program in its second
decomposition (``_assert_tensor_metadata``: "Tensor dtype mismatch"), or is wrong too.

The pass rewrites, in every graph of an ATen program (control-flow branches included)::

    copy_(dst, src)
  ->
    copy_(dst, expand_as(_to_copy(src, dtype=dst.dtype), dst))

converting only when the dtypes differ and broadcasting only when the shapes may differ. That is
what ``copy_`` does, so eager semantics are unchanged; the functional value the method reads and
the buffer's new value then both have the buffer's dtype and shape, and the write can be made in
place like any other (``backend.aliases``).
"""

from __future__ import annotations

import contextlib

import torch
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram

from executorch_trt.graph.edit import rewrite_calls
from executorch_trt.graph.nodes import args_of, copy_provenance, same_shape

aten = torch.ops.aten
COPY_OPS = (aten.copy_.default, aten.copy.default)


def _make_explicit(graph: torch.fx.Graph, copy: torch.fx.Node) -> bool:
    args = args_of(copy)
    dst, src = args[0], args[1]
    if not isinstance(dst, torch.fx.Node) or not isinstance(src, torch.fx.Node):
        return False
    dst_val, src_val = dst.meta.get("val"), src.meta.get("val")
    if not isinstance(dst_val, torch.Tensor) or not isinstance(src_val, torch.Tensor):
        return False
    convert = src_val.dtype != dst_val.dtype
    broadcast = not same_shape(src_val, dst_val)
    if not convert and not broadcast:
        return False
    # The values' fake mode, so the new nodes' values are fake too (real ones compute as is).
    fake_mode = detect_fake_mode([dst_val, src_val]) or contextlib.nullcontext()
    value, value_val = src, src_val
    with graph.inserting_before(copy):
        if convert:
            value = graph.call_function(aten._to_copy.default, (value,), {"dtype": dst_val.dtype})
            with fake_mode:
                value_val = aten._to_copy.default(value_val, dtype=dst_val.dtype)
            value.meta["val"] = value_val
            copy_provenance(copy, value)
        if broadcast:
            value = graph.call_function(aten.expand_as.default, (value, dst))
            with fake_mode:
                value.meta["val"] = aten.expand_as.default(value_val, dst_val)
            copy_provenance(copy, value)
    copy.replace_input_with(src, value)
    return True


def make_copy_conversions_explicit(ep: ExportedProgram) -> int:
    """Rewrites, in place, every ``copy_`` / ``copy`` of ATen program ``ep`` (all its graphs)
    whose source differs from its destination in dtype or shape (module docstring); returns
    how many. Idempotent: a rewritten copy's source already matches. Nodes without fake
    values (``meta["val"]``) are left alone. Raises nothing."""
    return rewrite_calls(ep, COPY_OPS, _make_explicit)
