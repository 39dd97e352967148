"""``integer_remainder``: an integer ``remainder`` (Python's ``%``) with PyTorch's result in
the portable engine's nested program.

PyTorch's remainder has the sign of the divisor (``-7 % 3 == 2``). ExecuTorch 1.5.1's
``remainder.Tensor_out`` / ``remainder.Scalar_out`` kernels compute an integer remainder as C's
``a % b`` (``kernels/portable/cpu/util/math_util.h`` ``remainder_override``), which has the sign
of the dividend (``-1``): a ring-buffer index ``(i + step) % n`` with a negative step goes
negative. Plain ExecuTorch returns the same wrong value. Each integer remainder is rewritten
with ``fmod`` (C's remainder, which ExecuTorch computes as PyTorch does), corrected where its
sign differs from the divisor's::

    r = fmod(a, b)
    remainder(a, b) = where(r != 0 and (r < 0) != (b < 0), r + b, r)

``r + b`` is only taken where ``r`` and ``b`` have opposite signs, so it cannot overflow. A float
remainder is left alone (ExecuTorch's float kernel matches PyTorch), and so is
``remainder.Scalar_Tensor`` (a number ``%`` a tensor), which ExecuTorch has no kernel for.
"""

from __future__ import annotations

import torch

from executorch_trt.graph.edit import EDGE, insert_before
from executorch_trt.graph.nodes import copy_provenance

_REMAINDERS = (EDGE.aten.remainder.Tensor, EDGE.aten.remainder.Scalar)


def _integer_remainder(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    if node.op != "call_function" or node.target not in _REMAINDERS:
        return False
    if node.target is EDGE.aten.remainder.Scalar and _number_divisor(node) == 0:
        return False  # not a nonzero int: left to ExecuTorch (which refuses a zero divisor)
    return (
        isinstance(val, torch.Tensor)
        and not val.dtype.is_floating_point
        and not val.dtype.is_complex
        and val.dtype != torch.bool
    )


def _number_divisor(node: torch.fx.Node) -> int:
    """``remainder.Scalar``'s divisor when it is an int, else 0."""
    b = node.args[1]
    return b if isinstance(b, int) and not isinstance(b, bool) else 0


def _rewrite(node: torch.fx.Node) -> torch.fx.Node:
    a, b = node.args[0], node.args[1]
    added: list[torch.fx.Node] = []

    def add(target: object, *args: object) -> torch.fx.Node:
        added.append(insert_before(node, target, args))
        return added[-1]

    if node.target is EDGE.aten.remainder.Tensor:
        r = add(EDGE.aten.fmod.Tensor, a, b)
        signs_differ = add(
            EDGE.aten.ne.Tensor, add(EDGE.aten.lt.Scalar, r, 0), add(EDGE.aten.lt.Scalar, b, 0)
        )
        fix = add(EDGE.aten.logical_and.default, add(EDGE.aten.ne.Scalar, r, 0), signs_differ)
        shifted = add(EDGE.aten.add.Tensor, r, b)
    else:
        r = add(EDGE.aten.fmod.Scalar, a, b)
        # With a number divisor the sign test is known: r is wrong where its sign is not b's.
        fix = add(EDGE.aten.lt.Scalar if _number_divisor(node) > 0 else EDGE.aten.gt.Scalar, r, 0)
        shifted = add(EDGE.aten.add.Scalar, r, b)
    result = add(EDGE.aten.where.self, fix, shifted, r)
    copy_provenance(node, *added)
    return result


def integer_remainders_as_pytorch(graph_module: torch.fx.GraphModule) -> int:
    """Rewrites each integer ``remainder`` of ``graph_module`` and of its control-flow branches
    (module docstring); returns how many."""
    rewritten = 0
    for module in list(graph_module.modules()):
        if not isinstance(module, torch.fx.GraphModule):
            continue
        found = [n for n in module.graph.nodes if _integer_remainder(n)]
        for node in found:
            node.replace_all_uses_with(_rewrite(node))
            module.graph.erase_node(node)
        if found:
            module.recompile()
            rewritten += len(found)
    return rewritten
