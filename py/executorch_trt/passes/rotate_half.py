"""``rotate_half_as_linear``: RoPE's ``rotate_half`` of a dynamic value as a linear layer XNNPACK
runs, in the portable engine's nested program.

transformers' rotary embedding (Llama, Qwen2, Mistral, Gemma, ...) rotates half of each head::

    rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2], dim=-1)

With a dynamic sequence length, ExecuTorch's XNNPACK partitioner refuses both slices
(``SliceCopyConfig`` takes static shapes only), so they run on ExecuTorch's portable kernels
and cut each decoder layer's XNNPACK subgraph in two, for q and k alike. The same values are
``linear(x, R)`` with ``R`` the constant ``[D, D]`` signed permutation (``R[j, j + D/2] = -1``
and ``R[j + D/2, j] = 1``): each output is one input, negated or not, plus zeros, so for finite
inputs the result is exact in float32 (an infinity or NaN in a row spreads to the whole row of
the product). Each ``cat(neg(slice(x, -1, D/2, D)), slice(x, -1, 0, D/2), -1)`` of a float32
``x`` with a dynamic size and an even, static last size ``D`` in the top-level graph becomes
``linear(x, R)``; one ``R`` per ``D`` is added to the program as a parameter (ExecuTorch's
``create_constant_placeholder``; as a lifted tensor constant, shared by several XNNPACK
partitions, it failed to lower: docs/executorch_notes.md), stored with the weights. Static
slices are left alone: XNNPACK takes them.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from executorch_trt.graph.edit import EDGE, is_static

CAT = EDGE.aten.cat.default
NEG = EDGE.aten.neg.default
SLICE = EDGE.aten.slice_copy.Tensor
LINEAR = EDGE.aten.linear.default
#: What the linear inherits from the ``cat`` it replaces (where in the model it came from).
_PROVENANCE = ("nn_module_stack", "stack_trace", "source_fn_stack")


def _slice_bounds(node: object, source: torch.fx.Node, size: int) -> tuple[int, int] | None:
    """``(start, end)`` of ``node`` when it is a step-1 ``slice_copy`` of ``source``'s last
    dimension (of size ``size``) with static bounds; ``None`` otherwise."""
    if not isinstance(node, torch.fx.Node) or node.target != SLICE or node.args[0] is not source:
        return None
    args = list(node.args) + [None] * (5 - len(node.args))
    dim, start, end, step = args[1], args[2], args[3], args[4]
    rank = source.meta["val"].dim()
    if dim not in (-1, rank - 1) or step not in (None, 1):
        return None
    start = 0 if start is None else start
    end = size if end is None else end
    if not (isinstance(start, int) and isinstance(end, int)):
        return None
    return start, min(end, size)


def _rotated(cat: torch.fx.Node) -> torch.fx.Node | None:
    """The ``x`` that ``cat`` computes ``rotate_half`` of (module docstring), or ``None``."""
    if cat.op != "call_function" or cat.target != CAT or len(cat.args) < 2:
        return None
    parts, dim = cat.args[0], cat.args[1]
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        return None
    negated, lower = parts
    if not isinstance(negated, torch.fx.Node) or negated.target != NEG:
        return None
    upper = negated.args[0]
    if not isinstance(upper, torch.fx.Node) or not isinstance(upper.args[0], torch.fx.Node):
        return None
    source = upper.args[0]
    value = source.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return None
    size = value.shape[-1]
    if not is_static(size) or size % 2 or all(is_static(d) for d in value.shape):
        return None
    if dim not in (-1, value.dim() - 1):
        return None
    half = int(size) // 2
    if _slice_bounds(upper, source, size) != (half, size):
        return None
    if _slice_bounds(lower, source, size) != (0, half):
        return None
    return source


def rotation_matrix(size: int) -> torch.Tensor:
    """The float32 ``[size, size]`` ``R`` with ``linear(x, R) == rotate_half(x)`` (module
    docstring); ``size`` even."""
    half = size // 2
    rows = torch.arange(size)
    matrix = torch.zeros(size, size)
    matrix[rows[:half], rows[:half] + half] = -1.0
    matrix[rows[half:], rows[half:] - half] = 1.0
    return matrix


def _unused_name(ep: ExportedProgram, name: str) -> str:
    """``name``, or ``name`` with a numeric suffix, used by no node, weight or constant of
    ``ep``. ``create_constant_placeholder`` stores ``R`` under its node's name in
    ``state_dict``: a model weight already stored under that name (``self.rotate_half_64``,
    whose placeholder is ``p_rotate_half_64``) would be overwritten by ``R``."""
    taken = {n.name for n in ep.graph_module.graph.nodes} | set(ep.state_dict) | set(ep.constants)
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    return candidate


def rotate_half_as_linear(ep: ExportedProgram) -> int:
    """Rewrites each ``rotate_half`` of ``ep``'s top-level graph that the module docstring
    names, in place; returns how many. Slices and negations left without users are removed."""
    from executorch.backends.transforms.utils import create_constant_placeholder

    graph = ep.graph_module.graph
    matrices: dict[int, torch.fx.Node] = {}
    rewritten = 0
    for cat in list(graph.nodes):
        source = _rotated(cat)
        if source is None:
            continue
        size = int(source.meta["val"].shape[-1])
        if size not in matrices:
            first_input = next(n for n in graph.nodes if n.op == "placeholder")
            with graph.inserting_before(first_input):
                matrices[size] = create_constant_placeholder(
                    ep,
                    graph,
                    _unused_name(ep, f"rotate_half_{size}"),
                    InputKind.PARAMETER,
                    rotation_matrix(size),
                )
        with graph.inserting_before(cat):
            linear = graph.call_function(LINEAR, (source, matrices[size]))
        # Set, not computed: a fake linear over the dynamic size could add guards on it.
        linear.meta["val"] = cat.meta["val"]
        for key in _PROVENANCE:
            if key in cat.meta:
                linear.meta[key] = cat.meta[key]
        negated, lower = cat.args[0]
        upper = negated.args[0]
        cat.replace_all_uses_with(linear)
        graph.erase_node(cat)
        for node in (negated, upper, lower):
            if isinstance(node, torch.fx.Node) and not node.users:
                graph.erase_node(node)
        rewritten += 1
    if rewritten:
        ep.graph_module.recompile()
    return rewritten
