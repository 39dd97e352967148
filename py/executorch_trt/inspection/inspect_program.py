"""``inspect(program)``: an emitted program read off its execution plans (nothing is run) into a
``ProgramReport``: per method its delegates, operators outside delegates and state, and the
program-wide summary."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any, cast

from executorch.exir import schema

from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.inspection import plan as pa
from executorch_trt.inspection.pte_file import ProgramReadError, read_program
from executorch_trt.inspection.report import (
    UNKNOWN_ENGINE,
    MethodReport,
    ProgramReport,
    ProgramSummary,
    StateReport,
)
from executorch_trt.inspection.state import MethodAnalysis


def inspect(program: Any) -> ProgramReport:
    """Reports, per method of ``program``, its delegate calls, the operators it runs outside
    delegates and how each mutable buffer is updated (module docstring for the rules).

    ``program``: an ``ExecutorchProgramManager`` (its ``executorch_program`` is read), the
    bytes of a ``.pte`` (``bytes``/``bytearray``), or a path to one (``str``/``os.PathLike``).
    Raises ``ProgramReadError`` (a ``ValueError``) naming the file and the problem for a missing
    file, a directory, data that is not an ExecuTorch program or a truncated/corrupted one;
    ``TypeError`` for another type."""
    loaded = read_program(program)
    try:
        methods = tuple(
            MethodAnalysis(loaded.program, plan).report() for plan in loaded.program.execution_plan
        )
    except IndexError as exc:  # an index in the plan points past its table
        raise ProgramReadError(
            f"{loaded.source}: the program is inconsistent ({exc}); the file is corrupted; "
            "export it again"
        ) from None
    return ProgramReport(loaded.source, loaded.size, methods, _summary(loaded.program, methods))


def _buffer_key(plan: schema.ExecutionPlan, s: StateReport) -> tuple[object, ...]:
    """Identity of a buffer across methods: its FQN, else its slot in the shared arena."""
    if s.fqn:
        return ("fqn", s.fqn)
    if "shared_arena" in s.evidence:  # evidence of a memory-planned tensor only
        allocation = pa.state_tensor(plan, s.value).allocation_info
        return ("arena", cast(schema.AllocationDetails, allocation).memory_offset)
    return ("value", plan.name, s.value)


def _engine_summary(methods: Sequence[MethodReport]) -> str:
    """Which engines the program's ``TensorRTBackend`` delegates use (each with what it is and
    where it runs), then any other backends; ``ProgramSummary.engine_summary``."""
    delegates = [d for m in methods for d in m.delegates]
    engines = list(
        dict.fromkeys(
            f"{d.engine or UNKNOWN_ENGINE} ({d.engine_description})"
            for d in delegates
            if d.backend == BACKEND_ID
        )
    )
    others = list(dict.fromkeys(d.backend for d in delegates if d.backend != BACKEND_ID))
    if not delegates:
        return "no delegate (ExecuTorch's CPU kernels)"
    if not engines:
        return f"no {BACKEND_ID} delegate ({', '.join(others)} delegates)"
    text = ("engine " if len(engines) == 1 else "engines ") + ", ".join(engines)
    return text + (f"; other delegates: {', '.join(others)}" if others else "")


def _summary(program: schema.Program, methods: Sequence[MethodReport]) -> ProgramSummary:
    delegate_calls: dict[str, int] = collections.Counter()
    engines: dict[str, int] = collections.Counter()
    buffers: dict[object, int] = {}
    for plan, m in zip(program.execution_plan, methods):
        for backend, n in m.delegate_calls.items():
            delegate_calls[backend] += n
        for engine, n in m.engines.items():
            engines[engine] += n
        for s in m.state:
            buffers[_buffer_key(plan, s)] = s.nbytes
    return ProgramSummary(
        methods=len(methods),
        delegate_calls=dict(delegate_calls),
        operators_outside_delegates=sum(sum(m.operators.values()) for m in methods),
        state_buffers=len(buffers),
        state_bytes=sum(buffers.values()),
        state_bytes_copied_per_call={m.name: m.state_bytes_copied_per_call for m in methods},
        zero_copy=all(
            m.state_bytes_copied_per_call == 0 and m.input_bytes_copied_per_call == 0
            for m in methods
        ),
        engines=dict(engines),
        engine_summary=_engine_summary(methods),
    )
