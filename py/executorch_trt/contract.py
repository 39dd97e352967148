"""The binding contract of one partition: ordered bindings and the in-place alias decision.

Order (DESIGN.md contract 3): the runtime binds ``execute()`` argument ``i`` to
``inputs[i]`` and argument ``len(inputs) + j`` to ``outputs[j]``. ExecuTorch passes a delegate
its inputs in the fused partition's placeholder order (first use inside the partition, not the
method's input order) and its outputs in the partition's output order. Both orders are read
from the partition program and *asserted* against its graph: ``binding_contract`` raises
``ValueError`` if ``graph_signature.user_inputs``/``user_outputs`` disagree with the graph's
placeholders/outputs, or if the partition carries a mutation output (which
``arrange_graph_outputs`` would move ahead of the user outputs).

Aliasing (DESIGN.md contract 2): ``aliased_outputs`` is the single place that decides which
outputs update an input in place; the decision is carried in the blob and never re-derived.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence, Tuple

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from executorch_trt.blob import AliasedIO, Binding
from executorch_trt.passes.kv_cache_update_pass import KV_CACHE_UPDATE

_DTYPE_NAMES: Dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float64: "float64", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
}


@dataclasses.dataclass(frozen=True)
class BindingContract:
    """Bindings in delegate argument order, plus the output/input nodes they came from."""

    inputs: Tuple[Binding, ...]
    outputs: Tuple[Binding, ...]
    input_nodes: Tuple[torch.fx.Node, ...]
    output_nodes: Tuple[torch.fx.Node, ...]


def _binding(name: str, node: torch.fx.Node) -> Binding:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise ValueError(
            f"TensorRTBackend: binding '{name}' is not a tensor ({type(val).__name__})"
        )
    if val.dtype not in _DTYPE_NAMES:
        raise ValueError(f"TensorRTBackend: binding '{name}' has unsupported dtype {val.dtype}")
    shape = []
    for d in val.shape:
        if not isinstance(d, int):
            raise ValueError(
                f"TensorRTBackend: binding '{name}' has a dynamic dimension ({d}) in shape "
                f"{list(val.shape)}; the delegate (blob format version 1) supports static shapes "
                "only. Export with fixed sizes: call torch.export.export without dynamic_shapes "
                "(or with every dimension static), and for several sizes export one method per "
                "shape, e.g. executorch_trt.export({'prefill': ep_prefill, 'decode': ep_decode})"
            )
        shape.append(d)
    return Binding(name, _DTYPE_NAMES[val.dtype], tuple(shape))


def binding_contract(ep: ExportedProgram) -> BindingContract:
    """Builds the ordered bindings of partition program ``ep``.

    Inputs: ``ep.graph_signature.user_inputs`` (names = placeholder names). Outputs:
    ``ep.graph_signature.user_outputs`` (names = output node names). Raises ``ValueError`` if
    either order disagrees with the graph, or if ``ep`` has a non-user output.
    """
    sig = ep.graph_signature
    non_user = [s for s in sig.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if non_user:
        raise ValueError(
            "TensorRTBackend: partition has mutation outputs "
            f"{[s.arg.name for s in non_user]}; mutated buffers must stay above the delegate "
            "(TensorRTPartitioner never tags them)"
        )
    user_inputs = set(sig.user_inputs)
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    if [n.name for n in placeholders] != list(sig.user_inputs):
        raise ValueError(
            "TensorRTBackend: delegate input order mismatch: graph placeholders "
            f"{[n.name for n in placeholders]} vs graph_signature.user_inputs "
            f"{list(sig.user_inputs)}"
        )
    output_nodes = list(ep.graph.output_node().args[0])
    if [getattr(n, "name", None) for n in output_nodes] != list(sig.user_outputs):
        raise ValueError(
            "TensorRTBackend: delegate output order mismatch: graph outputs "
            f"{[getattr(n, 'name', n) for n in output_nodes]} vs graph_signature.user_outputs "
            f"{list(sig.user_outputs)}"
        )
    return BindingContract(
        inputs=tuple(_binding(n.name, n) for n in placeholders),
        outputs=tuple(_binding(n.name, n) for n in output_nodes),
        input_nodes=tuple(placeholders),
        output_nodes=tuple(output_nodes),
    )


def aliased_outputs(
    contract: BindingContract, kv_cache: str, shared_inputs: Sequence[str] = ()
) -> List[AliasedIO]:
    """Decides which outputs update an input in place.

    In ``kv_cache="inplace"`` mode an output produced by ``executorch_trt.kv_cache_update`` whose
    ``cache`` argument is a partition input used by nothing else gets
    ``AliasedIO(output, input, kind="kv_cache_update", ownership="caller")``. The single-use
    condition guarantees no op inside the engine reads the old cache after the in-place write;
    ``shared_inputs`` (inputs also read outside the partition, from the partitioner) are never
    aliased, so no op outside the engine can observe the write early either.
    ``copy_back`` mode, and mutations written by ordinary ops, get no alias (ExecuTorch copies
    the new value back).
    """
    if kv_cache != "inplace":
        return []
    inputs = set(contract.input_nodes)
    shared = set(shared_inputs)
    aliases: List[AliasedIO] = []
    seen = set()
    for out in contract.output_nodes:
        if out.op != "call_function" or out.target != KV_CACHE_UPDATE or out in seen:
            continue
        cache = out.args[0]
        if cache in inputs and len(cache.users) == 1 and cache.name not in shared:
            aliases.append(AliasedIO(out.name, cache.name, "kv_cache_update", "caller"))
            seen.add(out)
    return aliases
