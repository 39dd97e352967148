"""The delegates of an execution plan: which backend each is, how often it is called, and for
``TensorRTBackend`` what its blob says (engine, bindings, aliases, dynamic sizes) and, for the
portable engine, which backends its nested program delegates to."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from executorch.exir import schema

from executorch_trt.format.blob import DelegateBlob, DelegateMetadata, read_blob
from executorch_trt.format.portable_payload import read_portable_payload
from executorch_trt.format.wire import BACKEND_ID, ENGINE_PORTABLE, ENGINE_TENSORRT
from executorch_trt.inspection import plan as pa
from executorch_trt.inspection.pte_file import parse_pte
from executorch_trt.inspection.report import ENGINE_DEVICES, DelegateReport

_XNNPACK_BACKEND = "XnnpackBackend"


def engine_description(engine: str | None, nested_backends: Sequence[str] = ()) -> str:
    """What an engine is and where it runs, as the C++ runners word it
    (``PlanDelegate::EngineDescription`` without ``engine <name> (...)``): ``"nested ExecuTorch
    program with XNNPACK, on the CPU"``, ``"nested ExecuTorch program on ExecuTorch's kernels,
    on the CPU"`` (no nested delegate), ``"TensorRT plan, on the GPU"``; ``"its blob cannot be
    read"`` for None."""
    if engine is None:
        return "its blob cannot be read"
    if engine == ENGINE_TENSORRT:
        return "TensorRT plan, on the GPU"
    if engine != ENGINE_PORTABLE:
        return engine
    if not nested_backends:
        return "nested ExecuTorch program on ExecuTorch's kernels, on the CPU"
    names = ["XNNPACK" if b == _XNNPACK_BACKEND else b for b in nested_backends]
    with_ = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"nested ExecuTorch program with {with_}, on the CPU"


def _delegate_blob(
    program: schema.Program, delegate: schema.BackendDelegate
) -> tuple[DelegateBlob | None, str | None]:
    """The blob of a ``TensorRTBackend`` delegate, or (None, why not)."""
    ref = delegate.processed
    if int(ref.location) != int(schema.DataLocation.INLINE):
        return None, (
            f"blob is in segment {ref.index}, not inline; inspect the serialized "
            ".pte (bytes or path) instead"
        )
    if not 0 <= ref.index < len(program.backend_delegate_data):
        return None, f"blob index {ref.index} is out of range"
    try:
        return read_blob(program.backend_delegate_data[ref.index].data), None
    except ValueError as exc:
        return None, f"cannot read the blob: {exc}"


def _nested_backends(payload: bytes) -> tuple[tuple[str, ...], str | None]:
    """The backends a portable payload's nested program delegates to, each once in first-use
    order, or ((), why they cannot be read)."""
    try:
        nested = parse_pte(read_portable_payload(payload).program, "nested program")
    except ValueError as exc:
        return (), f"cannot read the portable engine's nested program: {exc}"
    return tuple(
        dict.fromkeys(d.id for plan in nested.execution_plan for d in plan.delegates)
    ), None


def delegate_reports(
    program: schema.Program, plan: schema.ExecutionPlan
) -> tuple[list[DelegateReport], list[DelegateMetadata | None]]:
    calls = collections.Counter(
        call.delegate_index
        for _, call in pa.instructions(plan)
        if isinstance(call, schema.DelegateCall)
    )
    reports: list[DelegateReport] = []
    metadata: list[DelegateMetadata | None] = []
    for index, delegate in enumerate(plan.delegates):
        if delegate.id != BACKEND_ID:
            reports.append(DelegateReport(index, delegate.id, calls[index]))
            metadata.append(None)
            continue
        blob, note = _delegate_blob(program, delegate)
        meta = blob.metadata if blob is not None else None
        metadata.append(meta)
        if blob is None or meta is None:
            reports.append(
                DelegateReport(
                    index,
                    delegate.id,
                    calls[index],
                    note=note,
                    engine_description=engine_description(None),
                )
            )
            continue
        nested: tuple[str, ...] = ()
        description = engine_description(meta.engine)
        if meta.engine == ENGINE_PORTABLE:
            nested, note = _nested_backends(blob.payload)
            description = (
                engine_description(meta.engine, nested)
                if note is None
                else "nested ExecuTorch program (its delegates cannot be read), on the CPU"
            )
        reports.append(
            DelegateReport(
                index,
                delegate.id,
                calls[index],
                meta.engine,
                len(meta.inputs),
                len(meta.outputs),
                len(meta.aliased_io),
                note=note,
                dynamic=tuple(f"{s.name} in [{s.min}, {s.max}]" for s in meta.symbols),
                nested_backends=nested,
                device=ENGINE_DEVICES.get(meta.engine),
                engine_description=description,
            )
        )
    return reports, metadata
