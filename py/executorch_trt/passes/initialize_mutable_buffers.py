"""``InitializeMutableBuffersPass``: mutable buffers start from their exported value.

ExecuTorch leaves a mutated buffer uninitialized at load unless its placeholder has
``meta["et_init_buffer"] = True`` (``docs/executorch_notes.md``; ExecuTorch's
``InitializedMutableBufferPass`` does the same by name pattern); the emitter then serialises the
initial value into the program's mutable data. This pass sets the flag on every placeholder except
those ``MarkZeroBuffersPass`` marked; the emitter only honours it for mutable buffers, so
parameters, constants and user inputs are unaffected.

One rule for the result (``docs/contract.md`` 6, "Sessions"): a fresh load starts from the exported
initial values. A buffer whose initial value is all zeros (a KV cache, a step counter) is not
serialised at all (``MarkZeroBuffersPass``): the runtime's planned memory starts zeroed
(ExecuTorch's ``Module``, its Python runtime and ``executorch_trt``'s runtimes allocate it
zero-filled), so the cache costs no bytes in the ``.pte`` however large its capacity.
"""

from __future__ import annotations

import torch
from executorch.exir.pass_base import (
    ExportedProgramPassBase,
    ExportedProgramPassResult,
    PassBase,
    PassResult,
)
from torch.export import ExportedProgram

#: ``node.meta`` key of a buffer placeholder whose initial value is all zeros.
ZERO_INITIAL_VALUE = "executorch_trt_zero_initial_value"


def _is_all_zero(value: object) -> bool:
    """Whether every byte of ``value`` is 0: the state a buffer left out of the program starts
    from. Bytes, not ``== 0``: ``-0.0`` equals 0 but is not that state (``1 / -0.0`` is
    ``-inf``)."""
    if not isinstance(value, torch.Tensor) or value.is_meta:
        return False
    flat = value.detach().reshape(-1).contiguous()
    return not bool(flat.view(torch.uint8).any())


class MarkZeroBuffersPass(ExportedProgramPassBase):
    """Marks (``ZERO_INITIAL_VALUE``) each placeholder of a buffer whose exported value is all
    zeros, so ``InitializeMutableBuffersPass`` leaves its value out of the program. Buffers this
    method only reads are marked too: one another method mutates is mutable state here as well
    (ExecuTorch plans it shared) and would otherwise be serialised by this method. A
    ``transform_passes`` entry of ``to_edge_transform_and_lower`` (one of
    ``executorch_trt.transform_passes()``): only the exported program holds the values. A
    program that did not go through it keeps every initial value (larger, same numbers)."""

    def call(self, exported_program: ExportedProgram) -> ExportedProgramPassResult:
        sig = exported_program.graph_signature
        for node in exported_program.graph.nodes:
            fqn = sig.inputs_to_buffers.get(node.name) if node.op == "placeholder" else None
            if fqn is None:
                continue
            value = exported_program.state_dict.get(fqn, exported_program.constants.get(fqn))
            if _is_all_zero(value):
                node.meta[ZERO_INITIAL_VALUE] = True
            else:
                node.meta.pop(ZERO_INITIAL_VALUE, None)
        return ExportedProgramPassResult(exported_program, False)


class InitializeMutableBuffersPass(PassBase):
    """Sets ``meta["et_init_buffer"] = True`` on every placeholder not marked
    ``ZERO_INITIAL_VALUE`` (no graph change)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if node.op == "placeholder" and not node.meta.get(ZERO_INITIAL_VALUE):
                node.meta["et_init_buffer"] = True
        return PassResult(graph_module, False)
