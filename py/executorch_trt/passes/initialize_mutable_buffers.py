"""``InitializeMutableBuffersPass``: mutable buffers start from their exported value.

ExecuTorch leaves a mutated buffer uninitialized at load unless its placeholder has
``meta["et_init_buffer"] = True`` (DESIGN.md; ExecuTorch's ``InitializedMutableBufferPass`` does
the same by name pattern); the emitter then serialises the initial value into the program's
mutable data. This pass sets the flag on every placeholder except those named in
``zero_buffers``; the emitter only honours it for mutable buffers, so parameters, constants and
user inputs are unaffected.

One rule for the result (DESIGN.md contract 6): a fresh load starts from the exported initial
values. A buffer whose initial value is all zeros (a KV cache, a step counter) is not
serialised at all (``zero_buffer_placeholders``; issue 14): the runtime's planned memory starts
zeroed (ExecuTorch's ``Module``, its Python runtime and ``executorch_trt``'s runtimes allocate it
zero-filled), so the cache costs no bytes in the ``.pte`` however large its capacity.
"""

from __future__ import annotations

from typing import FrozenSet, Iterable

import torch
from executorch.exir.pass_base import PassBase, PassResult
from torch.export import ExportedProgram


def zero_buffer_placeholders(programs: Iterable[ExportedProgram]) -> FrozenSet[str]:
    """Placeholder names of the mutable buffers whose initial value is all zeros in every
    program that has a placeholder of that name (a name that is zero in one method and not
    in another is left out, so it stays serialised)."""
    zero, nonzero = set(), set()
    for ep in programs:
        mutated = set(ep.graph_signature.buffers_to_mutate.values())
        for name, fqn in ep.graph_signature.inputs_to_buffers.items():
            if fqn not in mutated:
                continue
            value = ep.state_dict.get(fqn, ep.constants.get(fqn))
            is_zero = isinstance(value, torch.Tensor) and not value.is_meta and not bool(
                value.detach().ne(0).any())
            (zero if is_zero else nonzero).add(name)
    return frozenset(zero - nonzero)


class InitializeMutableBuffersPass(PassBase):
    """Sets ``meta["et_init_buffer"] = True`` on every placeholder not in ``zero_buffers``
    (placeholder names, from ``zero_buffer_placeholders``; no graph change)."""

    def __init__(self, zero_buffers: FrozenSet[str] = frozenset()) -> None:
        super().__init__()
        self.zero_buffers = frozenset(zero_buffers)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if node.op == "placeholder" and node.name not in self.zero_buffers:
                node.meta["et_init_buffer"] = True
        return PassResult(graph_module, False)
