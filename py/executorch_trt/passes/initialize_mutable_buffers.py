"""``InitializeMutableBuffersPass``: mutable buffers start from their exported value.

ExecuTorch leaves a mutated buffer uninitialized at load unless its placeholder has
``meta["et_init_buffer"] = True`` (DESIGN.md; ExecuTorch's ``InitializedMutableBufferPass`` does
the same by name pattern). This pass sets the flag on every placeholder; the emitter only honours
it for mutable buffers, so parameters, constants and user inputs are unaffected. Result: a fresh
method load starts from the exported initial value (DESIGN.md contract 6).
"""

from __future__ import annotations

import torch
from executorch.exir.pass_base import PassBase, PassResult


class InitializeMutableBuffersPass(PassBase):
    """Sets ``meta["et_init_buffer"] = True`` on every placeholder (no graph change)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if node.op == "placeholder":
                node.meta["et_init_buffer"] = True
        return PassResult(graph_module, False)
