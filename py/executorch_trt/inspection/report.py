"""What ``executorch_trt.inspect`` returns: per method, its delegate calls, the operators it runs
outside delegates and how each mutable buffer is updated (``state.py`` says which values are
state and how each update mode is recognised), and its text form.

Engines are named as the C++ runners name them (``examples/plan_delegates.h``), so that nothing
in a report implies TensorRT ran a delegate the portable engine runs on the CPU, e.g.
``1 TensorRTBackend delegate, engine portable (nested ExecuTorch program with XNNPACK, on the
CPU)``.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

from executorch_trt.format.wire import BACKEND_ID, ENGINE_PORTABLE, ENGINE_TENSORRT

FORMAT = "executorch_trt.inspect/1"

WRITTEN_BACK = "written_back"
IN_PLACE_KERNEL = "in_place_kernel"
IN_PLACE_DELEGATE = "in_place_delegate"
READ_ONLY = "read_only"
#: Update modes, in the order ``update`` picks them.
UPDATE_MODES = (WRITTEN_BACK, IN_PLACE_KERNEL, IN_PLACE_DELEGATE, READ_ONLY)

#: Where each engine runs (``device``).
ENGINE_DEVICES = {ENGINE_PORTABLE: "CPU", ENGINE_TENSORRT: "GPU"}
#: ``engines`` key of a ``TensorRTBackend`` delegate whose blob cannot be read.
UNKNOWN_ENGINE = "unknown"


@dataclasses.dataclass(frozen=True)
class DelegateReport:
    """One entry of a plan's ``delegates``: ``backend`` id and how many ``DelegateCall``
    instructions call it. For ``TensorRTBackend``, read from its blob: ``engine``, the number
    of ``inputs``/``outputs`` bindings and of ``aliased_outputs``, and ``dynamic``: each dynamic
    size as ``"name in [min, max]"`` (blob format version 2; empty when every shape is static);
    ``note`` says why the blob could not be read (the counts are then None). What runs it
    (module docstring): ``device`` (``"CPU"`` for the portable engine, ``"GPU"`` for tensorrt),
    ``engine_description`` (``engine_description()``), ``nested_backends`` (the portable
    engine's nested delegates' backends, each once); all empty for other backends."""

    index: int
    backend: str
    calls: int
    engine: str | None = None
    inputs: int | None = None
    outputs: int | None = None
    aliased_outputs: int | None = None
    note: str | None = None
    dynamic: tuple[str, ...] = ()
    nested_backends: tuple[str, ...] = ()
    device: str | None = None
    engine_description: str | None = None

    @property
    def engine_label(self) -> str | None:
        """``"portable, CPU"``, ``"tensorrt, GPU"``, ``"unknown"`` (blob unreadable); None for
        another backend (C++ ``PlanDelegate::EngineLabel``)."""
        if self.backend != BACKEND_ID:
            return None
        if self.engine is None:
            return UNKNOWN_ENGINE
        return f"{self.engine}, {self.device}" if self.device else self.engine

    def describe_engine(self) -> str:
        """``"engine portable (nested ExecuTorch program with XNNPACK, on the CPU)"``; ``""`` for
        another backend (C++ ``PlanDelegate::EngineDescription``)."""
        if self.backend != BACKEND_ID:
            return ""
        return f"engine {self.engine or UNKNOWN_ENGINE} ({self.engine_description})"


@dataclasses.dataclass(frozen=True)
class StateReport:
    """One mutable buffer (or written method input) of a method.

    ``name``: the buffer's FQN when recorded, else ``"value 12 [1, 2, 8, 4] float32"``
    (``input 0 ...`` for a method input). ``value``: its value id in the plan. ``dtype``:
    torch's dtype name; ``shape``: static sizes; ``nbytes``: its size in bytes. ``update``: one
    of ``UPDATE_MODES``; ``bytes_copied_per_call``: bytes copied per call because of it:
    ExecuTorch copy kernels writing it plus the delegate's reflect copies of it
    (``delegate_bytes_copied_per_call``, module docstring); ``functional_update_bytes_per_call``:
    bytes of full updated copies made by out-of-place update kernels reading it; ``updated_by``:
    every writer (copies, then kernels, then delegates, then reflect copies); ``evidence``: the
    rules that identified it as state (module docstring); ``views``: value ids of views of it
    (same storage; their writers count as its own)."""

    name: str
    fqn: str | None
    value: int
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    update: str
    bytes_copied_per_call: int
    functional_update_bytes_per_call: int
    updated_by: tuple[str, ...]
    evidence: tuple[str, ...]
    views: tuple[int, ...] = ()
    delegate_bytes_copied_per_call: int = 0

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("shape", "updated_by", "evidence", "views"):
            d[key] = list(d[key])
        return d


@dataclasses.dataclass(frozen=True)
class MethodReport:
    """One method (execution plan): ``delegates``; ``operators`` run outside delegates
    (``"aten::copy_"``, ``"aten::mul.out"``: name.overload -> number of ``KernelCall``
    instructions, in first-use order); ``state``: its mutable buffers; ``written_inputs``:
    method inputs it updates (a mutated user input)."""

    name: str
    delegates: tuple[DelegateReport, ...]
    operators: dict[str, int]
    state: tuple[StateReport, ...]
    written_inputs: tuple[StateReport, ...]

    @property
    def delegate_calls(self) -> dict[str, int]:
        """Backend id -> number of ``DelegateCall`` instructions."""
        counts: dict[str, int] = collections.Counter()
        for d in self.delegates:
            counts[d.backend] += d.calls
        return dict(counts)

    @property
    def engines(self) -> dict[str, int]:
        """Engine -> number of ``TensorRTBackend`` delegates it runs (``UNKNOWN_ENGINE`` for an
        unreadable blob), in first-use order; empty without such a delegate."""
        counts: dict[str, int] = collections.Counter()
        for d in self.delegates:
            if d.backend == BACKEND_ID:
                counts[d.engine or UNKNOWN_ENGINE] += 1
        return dict(counts)

    @property
    def engine_labels(self) -> tuple[str, ...]:
        """Each distinct ``DelegateReport.engine_label`` of the method's ``TensorRTBackend``
        delegates, in first-use order, e.g. ``("portable, CPU",)`` (C++
        ``ProgramDelegates::EngineLabels``)."""
        return tuple(
            dict.fromkeys(d.engine_label for d in self.delegates if d.engine_label is not None)
        )

    @property
    def delegate_summary(self) -> str:
        """The delegates grouped by what runs them, as the C++ runners print each method
        (``MethodDelegates::Describe``): ``"1 TensorRTBackend delegate, engine portable (nested
        ExecuTorch program with XNNPACK, on the CPU)"``, ``"9 XnnpackBackend delegates"``,
        groups joined by ``"; "``; ``"no delegate (ExecuTorch's CPU kernels)"``."""
        if not self.delegates:
            return "no delegate (ExecuTorch's CPU kernels)"
        groups: dict[tuple[str, str], int] = collections.Counter(
            (d.backend, d.describe_engine()) for d in self.delegates
        )
        return "; ".join(
            f"{n} {backend} delegate{'s' if n != 1 else ''}" + (f", {engine}" if engine else "")
            for (backend, engine), n in groups.items()
        )

    @property
    def state_bytes(self) -> int:
        """Bytes of all the method's mutable buffers."""
        return sum(s.nbytes for s in self.state)

    @property
    def state_bytes_copied_per_call(self) -> int:
        """Bytes of state copied per call: ExecuTorch's write-backs into mutable buffers plus
        the delegate's reflect copies of them."""
        return sum(s.bytes_copied_per_call for s in self.state)

    @property
    def input_bytes_copied_per_call(self) -> int:
        """Bytes copied per call for method inputs the program writes (write-backs and
        reflect copies)."""
        return sum(s.bytes_copied_per_call for s in self.written_inputs)

    def buffer(self, name: str) -> StateReport:
        """The state entry called ``name``; ``KeyError`` listing the names otherwise."""
        for s in self.state:
            if s.name == name:
                return s
        raise KeyError(
            f"method {self.name!r} has no mutable buffer {name!r} (it has "
            f"{[s.name for s in self.state]})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "delegate_calls": self.delegate_calls,
            "delegates": [dataclasses.asdict(d) for d in self.delegates],
            "engines": self.engines,
            "delegate_summary": self.delegate_summary,
            "operators": dict(self.operators),
            "state": [s.to_json() for s in self.state],
            "written_inputs": [s.to_json() for s in self.written_inputs],
            "state_bytes": self.state_bytes,
            "state_bytes_copied_per_call": self.state_bytes_copied_per_call,
            "input_bytes_copied_per_call": self.input_bytes_copied_per_call,
        }


@dataclasses.dataclass(frozen=True)
class ProgramSummary:
    """Program-wide totals. ``state_buffers``/``state_bytes`` count each buffer once even when
    several methods share it (same FQN, or same slot of the shared arena);
    ``state_bytes_copied_per_call``: method -> bytes; ``zero_copy``: no method copies any state
    or input back (no write-back and no delegate reflect copy); ``engines``: engine -> number of
    ``TensorRTBackend`` delegates it runs, over all methods; ``engine_summary``: which engines
    the program's delegates use, e.g. ``"engine portable (nested ExecuTorch program with
    XNNPACK, on the CPU)"`` (the text's first line ends with it)."""

    methods: int
    delegate_calls: dict[str, int]
    operators_outside_delegates: int
    state_buffers: int
    state_bytes: int
    state_bytes_copied_per_call: dict[str, int]
    zero_copy: bool
    engines: dict[str, int] = dataclasses.field(default_factory=dict)
    engine_summary: str = ""


@dataclasses.dataclass(frozen=True)
class ProgramReport:
    """What ``inspect`` returns. ``str(report)`` is ``format_table()``; ``to_json()`` a
    JSON-serialisable dict with ``"format": FORMAT``."""

    source: str
    size: int | None
    methods: tuple[MethodReport, ...]
    summary: ProgramSummary

    def method(self, name: str) -> MethodReport:
        """The method called ``name``; ``KeyError`` listing the methods otherwise."""
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(f"program has no method {name!r} (it has {[m.name for m in self.methods]})")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "source": self.source,
            "size": self.size,
            "summary": dataclasses.asdict(self.summary),
            "methods": [m.to_json() for m in self.methods],
        }

    def format_table(self) -> str:
        """The report as text: per method its delegate calls, operators outside delegates and a
        table of its state, then the program summary."""
        return _format_report(self)

    def __str__(self) -> str:
        return self.format_table()


# --- text ----------------------------------------------------------------------------------

_COLUMNS = ("name", "dtype", "shape", "bytes", "update", "copied/call")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"


def _engines_line(delegates: Sequence[DelegateReport]) -> str:
    """``"engines: portable x1 (nested ExecuTorch program with XNNPACK, on the CPU)"``: each
    engine of the ``TensorRTBackend`` delegates with how many it runs and what it is."""
    groups: dict[tuple[str, str | None], int] = collections.Counter(
        (d.engine or UNKNOWN_ENGINE, d.engine_description)
        for d in delegates
        if d.backend == BACKEND_ID
    )
    return "engines: " + (
        ", ".join(f"{engine} x{n} ({what})" for (engine, what), n in groups.items())
        or f"none (no {BACKEND_ID} delegate)"
    )


def _delegate_line(d: DelegateReport) -> str:
    text = f"delegate {d.index}: {d.backend}, {d.calls} call{'s' if d.calls != 1 else ''}"
    if d.engine is not None:
        text += (
            f", {d.engine} engine, {d.inputs} inputs, {d.outputs} outputs, "
            f"{d.aliased_outputs} aliased"
        )
    if d.dynamic:
        text += f", dynamic {', '.join(d.dynamic)}"
    if d.note:
        text += f" ({d.note})"
    return text


def _state_table(entries: Sequence[StateReport], indent: str) -> list[str]:
    rows = [_COLUMNS] + [
        (s.name, s.dtype, str(list(s.shape)), str(s.nbytes), s.update, str(s.bytes_copied_per_call))
        for s in entries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    right = {3, 5}  # numbers
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    for s in entries:
        if s.delegate_bytes_copied_per_call:
            lines.append(
                f"{indent}note: {s.name}: {s.delegate_bytes_copied_per_call} of its "
                "bytes copied per call are the delegate's reflect copy (its aliased "
                "output is a separate value; finalise with "
                "executorch_trt.backend_config(), in-place planning on, to update it "
                "in place)"
            )
        if s.functional_update_bytes_per_call:
            lines.append(
                f"{indent}note: {s.name}: out-of-place updates copy "
                f"{s.functional_update_bytes_per_call} bytes per call inside kernels"
            )
    return lines


def _format_method(m: MethodReport) -> list[str]:
    lines = [f"method {m.name}", f"  delegate calls: {_counts(m.delegate_calls)}"]
    lines += [f"    {_delegate_line(d)}" for d in m.delegates]
    lines.append(f"  {_engines_line(m.delegates)}")
    lines.append(f"  operators outside delegates: {_counts(m.operators)}")
    if m.state:
        lines.append(
            f"  state: {len(m.state)} buffer{'s' if len(m.state) != 1 else ''}, "
            f"{m.state_bytes} bytes"
        )
        lines += _state_table(m.state, "    ")
    else:
        lines.append("  state: none")
    if m.written_inputs:
        lines.append("  method inputs written by the program:")
        lines += _state_table(m.written_inputs, "    ")
        lines.append(f"  input bytes copied per call: {m.input_bytes_copied_per_call}")
    lines.append(f"  state bytes copied per call: {m.state_bytes_copied_per_call}")
    return lines


def _format_report(report: ProgramReport) -> str:
    size = f"{report.size} bytes, " if report.size is not None else ""
    s = report.summary
    lines = [
        (
            f"executorch_trt.inspect: {report.source} ({size}{s.methods} "
            f"method{'s' if s.methods != 1 else ''}; {s.engine_summary})"
        )
    ]
    for m in report.methods:
        lines += ["", *_format_method(m)]
    copied = ", ".join(f"{name} {n}" for name, n in s.state_bytes_copied_per_call.items())
    lines += [
        "",
        "summary",
        f"  delegate calls: {_counts(s.delegate_calls)}",
        f"  {_engines_line([d for m in report.methods for d in m.delegates])}",
        f"  operator calls outside delegates: {s.operators_outside_delegates}",
        (
            f"  state: {s.state_buffers} buffer{'s' if s.state_buffers != 1 else ''}, "
            f"{s.state_bytes} bytes"
        ),
        f"  state bytes copied per call: {copied or 'no methods'}",
        "  zero copy: " + ("yes" if s.zero_copy else "no (state is copied on some calls)"),
    ]
    return "\n".join(lines)
