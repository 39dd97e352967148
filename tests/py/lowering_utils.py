"""Helpers for inspecting real lowered/emitted programs in tests (no mocks)."""

from __future__ import annotations

import torch
from executorch.exir import schema, to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.tensor import (
    calculate_aligned_num_bytes,
    get_scalar_type,
    num_bytes_from_shape_and_dtype,
)

from executorch_trt.format.blob import DelegateBlob, read_blob
from executorch_trt.format.portable_payload import read_portable_payload
from executorch_trt.format.wire import BACKEND_ID


def delegate_calls(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [
        n
        for n in graph_module.graph.nodes
        if n.op == "call_function" and n.target is executorch_call_delegate
    ]


def lower_single_delegate(
    ep: torch.export.ExportedProgram, partitioner=None
) -> tuple[torch.fx.GraphModule, torch.fx.Node]:
    """Lowers ``ep`` (to_edge_transform_and_lower, no grad) with ``partitioner`` (default
    ``TensorRTPartitioner()``) and returns the edge graph module and its one delegate call;
    fails unless there is exactly one."""
    from executorch_trt import TensorRTPartitioner

    with torch.no_grad():
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner or TensorRTPartitioner()])
    gm = edge.exported_program().graph_module
    calls = delegate_calls(gm)
    assert len(calls) == 1, f"expected one delegate call, got {len(calls)}"
    return gm, calls[0]


def lowered_module(graph_module: torch.fx.GraphModule, call: torch.fx.Node):
    return getattr(graph_module, call.args[0].target)


def blob_of(graph_module: torch.fx.GraphModule, call: torch.fx.Node) -> DelegateBlob:
    return read_blob(lowered_module(graph_module, call).processed_bytes)


def execution_plan(et, method: str = "forward"):
    for plan in et.executorch_program.execution_plan:
        if plan.name == method:
            return plan
    raise KeyError(method)


def instructions(plan):
    return [i.instr_args for i in plan.chains[0].instructions]


def kernel_calls(plan, op_name: str):
    """KernelCall instructions whose operator is ``op_name`` (e.g. ``"aten::copy_"``)."""
    idx = {i for i, op in enumerate(plan.operators) if op.name == op_name}
    return [a for a in instructions(plan) if type(a).__name__ == "KernelCall" and a.op_index in idx]


def delegate_call_args(plan) -> list[list[int]]:
    return [a.args for a in instructions(plan) if type(a).__name__ == "DelegateCall"]


def tensor_values_of_shape(plan, shape) -> list[int]:
    return [
        i
        for i, v in enumerate(plan.values)
        if type(v.val).__name__ == "Tensor" and list(v.val.sizes) == list(shape)
    ]


def arena_tensor_bytes(plan, memory_id: int, alignment: int = 16) -> int:
    """Sum of the (alignment-rounded) sizes of the emitted tensors planned in arena
    `memory_id`: an upper bound on the arena's size when every planned slot belongs to an
    emitted tensor (the planner only ever reuses space, never adds it)."""
    total = 0
    for v in plan.values:
        t = v.val
        if type(t).__name__ != "Tensor" or t.allocation_info is None:
            continue
        if t.allocation_info.memory_id != memory_id:
            continue
        n = num_bytes_from_shape_and_dtype(torch.Size(t.sizes), get_scalar_type(t.scalar_type))
        total += calculate_aligned_num_bytes(n, alignment)
    return total


def nested_delegate_ids(blob: DelegateBlob) -> list[str]:
    """Backend ids of the delegates inside the nested program of a portable blob (e.g.
    ``["XnnpackBackend", ...]``)."""
    payload = read_portable_payload(blob.payload)
    nested = deserialize_pte_binary(payload.program).program
    return [d.id for d in nested.execution_plan[0].delegates]


def nested_operator_names(blob: DelegateBlob) -> list[str]:
    """Operator names (``name.overload``) of the nested program in a portable blob."""
    payload = read_portable_payload(blob.payload)
    nested = deserialize_pte_binary(payload.program).program
    return [
        o.name + ("." + o.overload if o.overload else "")
        for o in nested.execution_plan[0].operators
    ]


def nested_plans(program) -> dict:
    """{method: the execution plan of its (one) portable engine's nested program} of the
    ``ExecutorchProgramManager`` ``program``; a method without the delegate (a constant method
    such as ``get_max_seq_len``) is left out."""
    top = deserialize_pte_binary(bytes(program.buffer)).program
    plans = {}
    for plan in top.execution_plan:
        delegates = [d for d in plan.delegates if d.id == BACKEND_ID]
        if not delegates:
            continue
        (delegate,) = delegates
        blob = read_blob(top.backend_delegate_data[delegate.processed.index].data)
        nested = deserialize_pte_binary(read_portable_payload(blob.payload).program).program
        plans[plan.name] = nested.execution_plan[0]
    return plans


def nested_xnnpack_calls(plan) -> int:
    """How many XNNPACK delegate calls the nested execution plan ``plan`` makes per run."""
    return sum(isinstance(i, schema.DelegateCall) for i in instructions(plan))


def check_prompts_then_decode(model, prefill, decode, max_seq_len: int) -> None:
    """Prompts of 1, 5 and ``max_seq_len`` tokens through ``prefill``, each followed by three
    greedy ``decode`` steps; every call's last-position logits against ``model``'s (eager
    transformers, no cache) within 1e-4. ``prefill``/``decode``: loaded methods taking
    ``(input_ids[1, T], cache_position[T])`` (the same method for both with one dynamic
    ``forward``)."""
    g = torch.Generator().manual_seed(3)
    for length in (1, 5, max_seq_len):
        ids = torch.randint(3, model.config.vocab_size, (1, length), generator=g)
        (got,) = prefill.execute([ids, torch.arange(length)])
        for _ in range(3):
            with torch.no_grad():
                want = model(input_ids=ids, use_cache=False).logits[:, -1:]
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
            token = int(want[0, -1].argmax())
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
            (got,) = decode.execute([torch.tensor([[token]]), torch.tensor([ids.shape[1] - 1])])


def kernels_in_layers(plan, names: tuple[str, ...]) -> int:
    """Kernel calls named in ``names`` after the nested plan's first XNNPACK call (layer 0's
    norm and projections); those before it build the positions and the mask, on int64 and
    bool values XNNPACK does not take."""
    calls = instructions(plan)
    first = next(k for k, call in enumerate(calls) if isinstance(call, schema.DelegateCall))
    return sum(
        k > first and plan.operators[call.op_index].name in names
        for k, call in enumerate(calls)
        if isinstance(call, schema.KernelCall)
    )


class NestedPassOnDynamicForward:
    """Mixin for an ``absltest.TestCase`` of a nested-program pass (``PASS``: its name in
    ``executorch_trt.passes.pipeline``): transformers' Llama (examples/decoder_model.py)
    exported by ``export_llm`` (one dynamic ``forward``) with the pass (``program``, ``plan``:
    its nested execution plan) and with the pass replaced by a no-op (``without``, ``before``);
    the logits of prompts of several lengths then decode steps are checked against eager."""

    PASS: str
    MAX_SEQ_LEN = 8
    CAPACITY = 32

    @classmethod
    def setUpClass(cls):
        import unittest.mock

        from decoder_model import build_model
        from executorch_trt.llm import export_llm

        cls.model = build_model(cls.CAPACITY)
        cls.program = export_llm(cls.model, cls.MAX_SEQ_LEN, max_context_len=cls.CAPACITY)
        with unittest.mock.patch(f"executorch_trt.passes.pipeline.{cls.PASS}", lambda _: 0):
            cls.without = export_llm(cls.model, cls.MAX_SEQ_LEN, max_context_len=cls.CAPACITY)
        cls.plan = nested_plans(cls.program)["forward"]
        cls.before = nested_plans(cls.without)["forward"]

    def test_prompts_of_several_lengths_then_decode_match_eager(self):
        from executorch_trt import runtime

        forward = runtime.load(self.program.buffer).load_method("forward")
        check_prompts_then_decode(self.model, forward, forward, self.MAX_SEQ_LEN)
