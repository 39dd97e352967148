"""Portable engine builder: the partition as a nested ExecuTorch program.

The partition program (edge dialect, KV writes already rewritten) is finalised with
``to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
alloc_graph_input=False, alloc_graph_output=False)))`` so every input and output of the nested
method ``forward`` is unplanned and bound to the delegate's (caller's) storage at execute time.
A ``torch.cond`` in the partition (a cross-attention cache update) is planned in place first
(``passes.cross_attn_cache.plan_cond_caches_in_place``): its cache output becomes the nested
method's cache input itself, so the update lands in the caller's storage and nothing lives in
the arena all ``cond`` branches share (ExecuTorch #21490).
The payload descriptor lists the engine's binding names in nested-method order
(``payload.py``); which outputs alias which inputs is the blob metadata's alone.
"""

from __future__ import annotations

from typing import Sequence

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.program._program import EdgeProgramManager
from torch.export import ExportedProgram

from executorch_trt.blob import AliasedIO
from executorch_trt.engines.portable.payload import PortableDescriptor, write_portable_payload
from executorch_trt.passes.cond_outputs import copy_cond_outputs
from executorch_trt.passes.cross_attn_cache import plan_cond_caches_in_place

METHOD_NAME = "forward"


class _NestedPlanningPass(MemoryPlanningPass):
    """ExecuTorch's planner, after binding ``cond`` cache outputs to their cache operands."""

    def run(self, graph_module, graph_signature=None):
        plan_cond_caches_in_place(graph_module)
        return super().run(graph_module, graph_signature)


def build(ep: ExportedProgram, aliases: Sequence[AliasedIO]) -> bytes:
    """Lowers ``ep`` to a nested ``.pte`` and wraps it in a portable payload.

    Args:
        ep: the partition program, edge dialect, no mutation outputs.
        aliases: the alias decision for this partition (``contract.decide_aliases``). Not
            needed to build: the nested program's ``kv_cache_update.out`` writes in place
            whenever the binding plan gives an output its input's storage, as the blob's
            ``aliased_io`` says.

    Returns the payload bytes (``PORTABLE_FORMAT.md``). Raises ``ValueError`` if the nested
    method's input/output names or counts disagree with ``ep``'s signature.
    """
    del aliases  # the blob metadata carries them (module docstring)
    input_names = list(ep.graph_signature.user_inputs)
    output_names = list(ep.graph_signature.user_outputs)
    # After the binding names are taken: a cond result must be copied into its bound output.
    copy_cond_outputs(ep)
    manager = EdgeProgramManager(
        {METHOD_NAME: ep}, compile_config=EdgeCompileConfig(_check_ir_validity=False)
    )
    et = manager.to_executorch(
        ExecutorchBackendConfig(
            memory_planning_pass=_NestedPlanningPass(
                alloc_graph_input=False, alloc_graph_output=False
            ),
        )
    )
    nested_sig = et.exported_program(METHOD_NAME).graph_signature
    if list(nested_sig.user_inputs) != input_names:
        raise ValueError(
            f"portable engine: nested inputs {list(nested_sig.user_inputs)} != partition inputs "
            f"{input_names}"
        )
    plan = et.executorch_program.execution_plan[0]
    if len(plan.inputs) != len(input_names) or len(plan.outputs) != len(output_names):
        raise ValueError(
            f"portable engine: nested method has {len(plan.inputs)} inputs/{len(plan.outputs)} "
            f"outputs, partition has {len(input_names)}/{len(output_names)}"
        )
    # to_executorch keeps the output order (the partition has no mutation outputs), so the
    # engine's output binding j is the partition's output j.
    descriptor = PortableDescriptor(inputs=tuple(input_names), outputs=tuple(output_names))
    return write_portable_payload(descriptor, et.buffer)
