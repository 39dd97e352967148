"""``executorch_trt.inspect(program)``: what an emitted ExecuTorch program runs, per method, and
how every piece of its state is updated on each call.

Read off the execution plans only (nothing is run): delegate calls by backend, operators run
outside delegates, every mutable buffer with its update mode and the bytes a call copies into
it, and the same for method inputs the program writes back.

**Which values are state** (mutable buffers). A tensor of a plan is reported as state when any
of these holds; each report lists the rules that matched (``evidence``):

* ``name``: its ``extra_tensor_info`` has a ``fully_qualified_name`` with location ``SEGMENT``.
  The emitter writes it for mutable buffers only, when exported with
  ``emit_mutable_buffer_names=True`` (``exir/emit/_emitter.py``, ``placeholder``; external
  constants also carry a name but with location ``EXTERNAL``).
* ``initial_value``: memory-planned *and* ``data_buffer_idx > 0``: a mutable buffer with its
  exported initial value in the mutable data segment (``_emitter._save_new_const_tensor``,
  buffers marked ``et_init_buffer``: ``executorch_trt.export`` marks those whose initial value
  is not all zeros).
* ``shared_arena``: planned in memory arena 2 of a plan with exactly three arenas.
  ``MemoryPlanningPass(share_mutable_buffers=True).run_multimethod`` places every mutable
  buffer there, appending arena 2 only to plans that use the default arenas 0 and 1.
* ``write_back``: the destination of an ``aten::copy_`` that is not a method input: ExecuTorch's
  write-back of a mutated buffer (``insert_write_back_for_buffers_pass``).
* ``read_before_write``: a planned tensor, not a method input, that an instruction reads before
  any instruction writes it, so it holds a value from the previous call (this covers a value
  passed to a ``DelegateCall`` as both input and output, and the target of an in-place kernel
  such as ``aten::index_put_`` after ExecuTorch's ``run_reinplace_pass``). Reads and writes of
  kernels come from the operator schema (``plan_accounting.kernel_effects``), of
  ``TensorRTBackend`` calls from the blob's input/output counts. For a delegate of another
  backend only a value passed twice is known to be read; its other arguments count as written,
  so a buffer that only such a delegate reads, in a program exported without names, initial
  values or shared buffers, is not recognised.

**How state is updated** (``update``; the first that applies):

* ``written_back``: an ExecuTorch copy kernel (``plan_accounting.COPY_KERNELS``:
  ``aten::copy_``, ``executorch_prim::et_copy_index``) writes it on every call;
  ``bytes_copied_per_call`` counts the copies' size.
* ``in_place_kernel``: an ExecuTorch kernel writes its storage directly (e.g. ``aten::index_put_``
  with ``self`` and ``out`` the same value).
* ``in_place_delegate``: a delegate writes its storage: the same value is passed to a
  ``DelegateCall`` as an input and as an output (the in-place planning of
  ``InplaceMemoryPlanningPass``), it is passed as a ``TensorRTBackend`` output, or it is a
  ``TensorRTBackend`` input that the blob's ``aliased_io`` names as the storage of an output.
* ``read_only``: nothing in this method writes it.

``updated_by`` lists every writer (a buffer can be aliased by a delegate *and* written back).
``functional_update_bytes_per_call`` counts out-of-place updates that read the buffer and
materialise a complete updated copy (``aten::index_put.out`` etc.): not a write-back, but a
full-size copy inside the kernel.

**The delegate's reflect copy.** A ``TensorRTBackend`` blob whose ``aliased_io`` makes output
``j`` the storage of input ``i`` updates input ``i`` in place; when ExecuTorch passes a
*separate* value for output ``j`` (another value id on other memory: a program finalised
without ``executorch_trt.backend_config()``, or with ``inplace=False``), the delegate then
copies the updated input into that output on every call (``BindingPlan::Execute``, counted by
``runtime.bytes_copied()``), typically before ExecuTorch writes the output back into the
buffer. Those bytes count in the input buffer's ``bytes_copied_per_call`` (and its method's
and the program's totals) next to any write-back; ``delegate_bytes_copied_per_call`` holds
them alone, ``updated_by`` says "reflect copy" and the table adds a note.

Byte counts are static: each instruction is counted once (both branches of a ``torch.cond``
are counted; a copy inside a ``torch.map`` body runs once per iteration).

**Which engine runs a delegate.** A ``TensorRTBackend`` blob's metadata names its engine
(``portable`` or ``tensorrt``), and that is the engine ``TensorRTBackend::init`` creates for it:
the report carries it per delegate (``engine``, ``device``, ``engine_description``), per method
(``engines``, ``delegate_summary``) and per program (``summary.engines``,
``summary.engine_summary``, also the first line of the text), so that nothing in it implies
TensorRT ran a delegate the portable engine runs on the CPU. For the portable engine
``nested_backends`` lists the backends its nested program delegates to (``XnnpackBackend``).
The wording is the C++ runners' (``examples/plan_delegates.h``), e.g. ``1 TensorRTBackend
delegate, engine portable (nested ExecuTorch program with XNNPACK, on the CPU)``.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Set, Tuple

from executorch.exir import schema

from executorch_trt import plan_accounting as pa
from executorch_trt.blob import DelegateBlob, DelegateMetadata, read_blob
from executorch_trt.wire import BACKEND_ID, ENGINE_PORTABLE, ENGINE_TENSORRT

FORMAT = "executorch_trt.inspect/1"

WRITTEN_BACK = "written_back"
IN_PLACE_KERNEL = "in_place_kernel"
IN_PLACE_DELEGATE = "in_place_delegate"
READ_ONLY = "read_only"
#: Update modes, in the order ``update`` picks them.
UPDATE_MODES = (WRITTEN_BACK, IN_PLACE_KERNEL, IN_PLACE_DELEGATE, READ_ONLY)

ProgramReadError = pa.ProgramReadError

#: Where each engine runs (``device``).
ENGINE_DEVICES = {ENGINE_PORTABLE: "CPU", ENGINE_TENSORRT: "GPU"}
#: ``engines`` key of a ``TensorRTBackend`` delegate whose blob cannot be read.
UNKNOWN_ENGINE = "unknown"
_XNNPACK_BACKEND = "XnnpackBackend"


def engine_description(engine: Optional[str], nested_backends: Sequence[str] = ()) -> str:
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
    engine: Optional[str] = None
    inputs: Optional[int] = None
    outputs: Optional[int] = None
    aliased_outputs: Optional[int] = None
    note: Optional[str] = None
    dynamic: Tuple[str, ...] = ()
    nested_backends: Tuple[str, ...] = ()
    device: Optional[str] = None
    engine_description: Optional[str] = None

    @property
    def engine_label(self) -> Optional[str]:
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
    fqn: Optional[str]
    value: int
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    update: str
    bytes_copied_per_call: int
    functional_update_bytes_per_call: int
    updated_by: Tuple[str, ...]
    evidence: Tuple[str, ...]
    views: Tuple[int, ...] = ()
    delegate_bytes_copied_per_call: int = 0

    def to_json(self) -> Dict:
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
    delegates: Tuple[DelegateReport, ...]
    operators: Dict[str, int]
    state: Tuple[StateReport, ...]
    written_inputs: Tuple[StateReport, ...]

    @property
    def delegate_calls(self) -> Dict[str, int]:
        """Backend id -> number of ``DelegateCall`` instructions."""
        counts: Dict[str, int] = collections.Counter()
        for d in self.delegates:
            counts[d.backend] += d.calls
        return dict(counts)

    @property
    def engines(self) -> Dict[str, int]:
        """Engine -> number of ``TensorRTBackend`` delegates it runs (``UNKNOWN_ENGINE`` for an
        unreadable blob), in first-use order; empty without such a delegate."""
        counts: Dict[str, int] = collections.Counter()
        for d in self.delegates:
            if d.backend == BACKEND_ID:
                counts[d.engine or UNKNOWN_ENGINE] += 1
        return dict(counts)

    @property
    def engine_labels(self) -> Tuple[str, ...]:
        """Each distinct ``DelegateReport.engine_label`` of the method's ``TensorRTBackend``
        delegates, in first-use order, e.g. ``("portable, CPU",)`` (C++
        ``ProgramDelegates::EngineLabels``)."""
        return tuple(dict.fromkeys(d.engine_label for d in self.delegates
                                   if d.engine_label is not None))

    @property
    def delegate_summary(self) -> str:
        """The delegates grouped by what runs them, as the C++ runners print each method
        (``MethodDelegates::Describe``): ``"1 TensorRTBackend delegate, engine portable (nested
        ExecuTorch program with XNNPACK, on the CPU)"``, ``"9 XnnpackBackend delegates"``,
        groups joined by ``"; "``; ``"no delegate (ExecuTorch's CPU kernels)"``."""
        if not self.delegates:
            return "no delegate (ExecuTorch's CPU kernels)"
        groups: Dict[Tuple[str, str], int] = collections.Counter(
            (d.backend, d.describe_engine()) for d in self.delegates)
        return "; ".join(f"{n} {backend} delegate{'s' if n != 1 else ''}"
                         + (f", {engine}" if engine else "")
                         for (backend, engine), n in groups.items())

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
        raise KeyError(f"method {self.name!r} has no mutable buffer {name!r} (it has "
                       f"{[s.name for s in self.state]})")

    def to_json(self) -> Dict:
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
    delegate_calls: Dict[str, int]
    operators_outside_delegates: int
    state_buffers: int
    state_bytes: int
    state_bytes_copied_per_call: Dict[str, int]
    zero_copy: bool
    engines: Dict[str, int] = dataclasses.field(default_factory=dict)
    engine_summary: str = ""


@dataclasses.dataclass(frozen=True)
class ProgramReport:
    """What ``inspect`` returns. ``str(report)`` is ``format_table()``; ``to_json()`` a
    JSON-serialisable dict with ``"format": FORMAT``."""

    source: str
    size: Optional[int]
    methods: Tuple[MethodReport, ...]
    summary: ProgramSummary

    def method(self, name: str) -> MethodReport:
        """The method called ``name``; ``KeyError`` listing the methods otherwise."""
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(f"program has no method {name!r} (it has {[m.name for m in self.methods]})")

    def to_json(self) -> Dict:
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


def inspect(program) -> ProgramReport:
    """Reports, per method of ``program``, its delegate calls, the operators it runs outside
    delegates and how each mutable buffer is updated (module docstring for the rules).

    ``program``: an ``ExecutorchProgramManager`` (its ``executorch_program`` is read), the
    bytes of a ``.pte`` (``bytes``/``bytearray``), or a path to one (``str``/``os.PathLike``).
    Raises ``ProgramReadError`` (a ``ValueError``) naming the file and the problem for a missing
    file, a directory, data that is not an ExecuTorch program or a truncated/corrupted one;
    ``TypeError`` for another type."""
    loaded = pa.load_program(program)
    try:
        methods = tuple(_MethodAnalysis(loaded.program, plan).report()
                        for plan in loaded.program.execution_plan)
    except IndexError as exc:  # an index in the plan points past its table
        raise ProgramReadError(
            f"{loaded.source}: the program is inconsistent ({exc}); the file is corrupted; "
            "export it again") from None
    return ProgramReport(loaded.source, loaded.size, methods, _summary(loaded.program, methods))


# --- delegates -----------------------------------------------------------------------------

def _delegate_blob(program: schema.Program, delegate: schema.BackendDelegate
                   ) -> Tuple[Optional[DelegateBlob], Optional[str]]:
    """The blob of a ``TensorRTBackend`` delegate, or (None, why not)."""
    ref = delegate.processed
    if int(ref.location) != int(schema.DataLocation.INLINE):
        return None, (f"blob is in segment {ref.index}, not inline; inspect the serialized "
                      ".pte (bytes or path) instead")
    if not 0 <= ref.index < len(program.backend_delegate_data):
        return None, f"blob index {ref.index} is out of range"
    try:
        return read_blob(program.backend_delegate_data[ref.index].data), None
    except ValueError as exc:
        return None, f"cannot read the blob: {exc}"


def _nested_backends(payload: bytes) -> Tuple[Tuple[str, ...], Optional[str]]:
    """The backends a portable payload's nested program delegates to, each once in first-use
    order, or ((), why they cannot be read)."""
    # Imported here: the engine package imports the exporter, which imports this module.
    from executorch_trt.engines.portable.payload import read_portable_payload

    try:
        nested = pa.parse_pte(read_portable_payload(payload).program, "nested program")
    except ValueError as exc:
        return (), f"cannot read the portable engine's nested program: {exc}"
    return tuple(dict.fromkeys(d.id for plan in nested.execution_plan
                               for d in plan.delegates)), None


def _delegate_reports(program: schema.Program, plan: schema.ExecutionPlan
                      ) -> Tuple[List[DelegateReport], List[Optional[DelegateMetadata]]]:
    calls = collections.Counter(call.delegate_index for _, call in pa.instructions(plan)
                                if isinstance(call, schema.DelegateCall))
    reports, metadata = [], []
    for index, delegate in enumerate(plan.delegates):
        if delegate.id != BACKEND_ID:
            reports.append(DelegateReport(index, delegate.id, calls[index]))
            metadata.append(None)
            continue
        blob, note = _delegate_blob(program, delegate)
        meta = blob.metadata if blob is not None else None
        metadata.append(meta)
        if meta is None:
            reports.append(DelegateReport(index, delegate.id, calls[index], note=note,
                                          engine_description=engine_description(None)))
            continue
        nested: Tuple[str, ...] = ()
        description = engine_description(meta.engine)
        if meta.engine == ENGINE_PORTABLE:
            nested, note = _nested_backends(blob.payload)
            description = engine_description(meta.engine, nested) if note is None else \
                "nested ExecuTorch program (its delegates cannot be read), on the CPU"
        reports.append(DelegateReport(
            index, delegate.id, calls[index], meta.engine, len(meta.inputs),
            len(meta.outputs), len(meta.aliased_io), note=note,
            dynamic=tuple(f"{s.name} in [{s.min}, {s.max}]" for s in meta.symbols),
            nested_backends=nested, device=ENGINE_DEVICES.get(meta.engine),
            engine_description=description))
    return reports, metadata


# --- one method ----------------------------------------------------------------------------

class _MethodAnalysis:
    """Walks one plan once: reads/writes of every instruction, then state and its writers."""

    def __init__(self, program: schema.Program, plan: schema.ExecutionPlan) -> None:
        self.plan = plan
        self.inputs: Set[int] = set(plan.inputs)
        self.delegates, self.metadata = _delegate_reports(program, plan)
        self.operators: Dict[str, int] = collections.Counter()
        self.read_before_write: Set[int] = set()
        self.delegate_in_place: Dict[int, List[str]] = collections.defaultdict(list)
        #: value -> [(bytes, description)] of the delegate's reflect copies of it per call.
        self.delegate_copies: Dict[int, List[Tuple[int, str]]] = collections.defaultdict(list)
        self.kernel_writes: Dict[int, List[str]] = collections.defaultdict(list)
        self._walk()

    def _delegate_effects(self, call: schema.DelegateCall, written: Set[int]
                          ) -> Tuple[List[int], List[int]]:
        """(reads, writes) of a DelegateCall; records which values the delegate writes in
        place (``delegate_in_place``). For a ``TensorRTBackend`` call with a readable blob the
        first ``len(inputs)`` arguments are read and the rest written, plus each input that an
        ``aliased_io`` entry makes an output's storage. For any other call only a value passed
        twice is known to be an input and an output; a value passed once counts as read if it
        was written before (or is a method input), else as written."""
        args = list(call.args)
        report = self.delegates[call.delegate_index]
        meta = self.metadata[call.delegate_index]
        who = f"{report.backend} delegate {report.index}"
        if meta is not None and len(args) == len(meta.inputs) + len(meta.outputs):
            ins, outs = args[:len(meta.inputs)], args[len(meta.inputs):]
            for j, v in enumerate(outs):
                # Only a state value or a method input is ever looked up in delegate_in_place.
                if v in ins:
                    self.delegate_in_place[v].append(
                        f"{who} (output '{meta.outputs[j].name}' is its input "
                        f"'{meta.inputs[ins.index(v)].name}')")
                else:
                    self.delegate_in_place[v].append(
                        f"{who} (output '{meta.outputs[j].name}' is stored in it)")
            for alias in meta.aliased_io:
                j = [b.name for b in meta.outputs].index(alias.output)
                i = [b.name for b in meta.inputs].index(alias.input)
                if outs[j] != ins[i]:
                    self.delegate_in_place[ins[i]].append(
                        f"{who} (aliased_io: output '{alias.output}' is stored in input "
                        f"'{alias.input}', {alias.kind})")
                if self._storage(outs[j]) != self._storage(ins[i]):
                    # BindingPlan::Execute: the updated input is copied into the separate
                    # output tensor ExecuTorch passed, on every call.
                    out_tensor = pa.tensor_at(self.plan, outs[j])
                    nbytes = pa.tensor_nbytes(out_tensor) if out_tensor is not None else 0
                    self.delegate_copies[ins[i]].append((nbytes, (
                        f"{who} reflect copy: it copies updated input '{alias.input}' into "
                        f"output '{alias.output}' ({pa.describe_value(self.plan, outs[j])}, "
                        f"a separate value), {nbytes} bytes")))
            return ins, outs
        counts = collections.Counter(args)
        twice = [v for v, n in counts.items() if n > 1]
        for v in twice:
            self.delegate_in_place[v].append(f"{who} (passed as input and output)")
        once = [v for v, n in counts.items() if n == 1]
        return twice + [v for v in once if v in written or v in self.inputs], \
            twice + [v for v in once if v not in written and v not in self.inputs]

    def _storage(self, value: int):
        """Where a value's data lives: (arena, offset) when memory-planned, else the value id.
        ExecuTorch emits a view (``view_copy`` removed by memory planning) as a second value
        with its base's arena and offset, so a view and its base share a key."""
        tensor = pa.tensor_at(self.plan, value)
        if tensor is not None and tensor.allocation_info is not None:
            return ("arena", tensor.allocation_info.memory_id, tensor.allocation_info.memory_offset)
        return ("value", value)

    def _walk(self) -> None:
        written: Set[int] = set()
        storage_written = {self._storage(v) for v in self.inputs}
        for _, call in pa.instructions(self.plan):
            if isinstance(call, schema.KernelCall):
                name = pa.operator_name(self.plan, call.op_index)
                self.operators[name] += 1
                reads, writes = pa.kernel_effects(self.plan, call)
                if self.plan.operators[call.op_index].name not in pa.COPY_KERNELS:
                    for v in dict.fromkeys(writes):  # an in-place op returns its self
                        self.kernel_writes[v].append(name)
            elif isinstance(call, schema.DelegateCall):
                reads, writes = self._delegate_effects(call, written)
            elif isinstance(call, schema.MoveCall):
                reads, writes = [call.move_from], [call.move_to]
            elif isinstance(call, schema.JumpFalseCall):
                reads, writes = [call.cond_value_index], []
            else:
                reads, writes = [], []
            for v in reads:
                if v not in written and v not in self.inputs \
                        and self._storage(v) not in storage_written:
                    self.read_before_write.add(v)
            written.update(writes)
            storage_written.update(self._storage(v) for v in writes)

    def _evidence(self, value: int, tensor: schema.Tensor, copy_dests: Set[int]) -> List[str]:
        planned = tensor.allocation_info is not None
        evidence = []
        if pa.tensor_fqn(tensor):
            evidence.append("name")
        if planned and tensor.data_buffer_idx > 0:
            evidence.append("initial_value")
        if planned and tensor.allocation_info.memory_id == 2 \
                and len(self.plan.non_const_buffer_sizes) == 3:
            evidence.append("shared_arena")
        if value in copy_dests and value not in self.inputs:
            evidence.append("write_back")
        if planned and value in self.read_before_write:
            evidence.append("read_before_write")
        return evidence

    def _state_entry(self, values: Sequence[int], evidence: Sequence[str],
                     copies: Sequence[pa.Copy], functional: Sequence[pa.Copy],
                     name: str) -> StateReport:
        """The report of the buffer whose value is ``values[0]``; ``values[1:]`` are views of
        it (same storage), whose writers count as the buffer's."""
        group = set(values)
        tensor = pa.tensor_at(self.plan, values[0])
        write_backs = [c for c in copies if c.destination in group]
        kernel_writers = [n for v in values for n in self.kernel_writes.get(v, [])]
        delegate_writers = [d for v in values for d in self.delegate_in_place.get(v, [])]
        reflects = [r for v in values for r in self.delegate_copies.get(v, [])]
        if write_backs:
            update = WRITTEN_BACK
        elif kernel_writers:
            update = IN_PLACE_KERNEL
        elif delegate_writers:
            update = IN_PLACE_DELEGATE
        else:
            update = READ_ONLY
        writers = [f"{c.op} from {pa.describe_value(self.plan, c.source)}, {c.nbytes} bytes"
                   for c in write_backs] + kernel_writers + delegate_writers + \
            [text for _, text in reflects]
        delegate_bytes = sum(n for n, _ in reflects)
        return StateReport(
            name=name, fqn=pa.tensor_fqn(tensor), value=values[0], dtype=pa.dtype_name(tensor),
            shape=pa.sizes(tensor), nbytes=pa.tensor_nbytes(tensor), update=update,
            bytes_copied_per_call=sum(c.nbytes for c in write_backs) + delegate_bytes,
            functional_update_bytes_per_call=sum(f.nbytes for f in functional
                                                 if f.source in group),
            updated_by=tuple(writers), evidence=tuple(evidence), views=tuple(values[1:]),
            delegate_bytes_copied_per_call=delegate_bytes)

    def _base_first(self, values: Sequence[int]) -> List[int]:
        """The buffer itself first (named, else initialised, else the largest, else the first
        value), then its views."""
        def rank(v):
            t = pa.tensor_at(self.plan, v)
            return (pa.tensor_fqn(t) is not None, t.data_buffer_idx > 0, pa.tensor_nbytes(t), -v)
        base = max(values, key=rank)
        return [base] + sorted(v for v in values if v != base)

    def report(self) -> MethodReport:
        plan = self.plan
        copies, functional = pa.copies(plan), pa.functional_updates(plan)
        copy_dests = {c.destination for c in copies}
        written_inputs = []
        groups: Dict[object, List[int]] = collections.defaultdict(list)
        evidence: Dict[int, List[str]] = {}
        for value, evalue in enumerate(plan.values):
            tensor = evalue.val
            if not isinstance(tensor, schema.Tensor):
                continue
            if value in self.inputs:
                if value in copy_dests or value in self.delegate_in_place \
                        or value in self.kernel_writes:
                    name = f"input {plan.inputs.index(value)} " + \
                        pa.describe_value(plan, value).split(" ", 2)[2]
                    written_inputs.append(self._state_entry(
                        [value], ["method_input"], copies, functional, name))
                continue
            evidence[value] = self._evidence(value, tensor, copy_dests)
            if evidence[value]:
                groups[self._storage(value)].append(value)
        state = []
        for values in groups.values():
            values = self._base_first(values)
            rules = [rule for rule in _EVIDENCE if any(rule in evidence[v] for v in values)]
            name = pa.tensor_fqn(pa.tensor_at(plan, values[0])) or \
                pa.describe_value(plan, values[0])
            state.append(self._state_entry(values, rules, copies, functional, name))
        state.sort(key=lambda s: s.value)
        return MethodReport(plan.name, tuple(self.delegates), dict(self.operators),
                            tuple(state), tuple(written_inputs))


_EVIDENCE = ("name", "initial_value", "shared_arena", "write_back", "read_before_write")


# --- program -------------------------------------------------------------------------------

def _buffer_key(plan: schema.ExecutionPlan, s: StateReport):
    """Identity of a buffer across methods: its FQN, else its slot in the shared arena."""
    if s.fqn:
        return ("fqn", s.fqn)
    tensor = plan.values[s.value].val
    if "shared_arena" in s.evidence:
        return ("arena", tensor.allocation_info.memory_offset)
    return ("value", plan.name, s.value)


def _engine_summary(methods: Sequence[MethodReport]) -> str:
    """Which engines the program's ``TensorRTBackend`` delegates use (each with what it is and
    where it runs), then any other backends; ``ProgramSummary.engine_summary``."""
    delegates = [d for m in methods for d in m.delegates]
    engines = list(dict.fromkeys(f"{d.engine or UNKNOWN_ENGINE} ({d.engine_description})"
                                 for d in delegates if d.backend == BACKEND_ID))
    others = list(dict.fromkeys(d.backend for d in delegates if d.backend != BACKEND_ID))
    if not delegates:
        return "no delegate (ExecuTorch's CPU kernels)"
    if not engines:
        return f"no {BACKEND_ID} delegate ({', '.join(others)} delegates)"
    text = ("engine " if len(engines) == 1 else "engines ") + ", ".join(engines)
    return text + (f"; other delegates: {', '.join(others)}" if others else "")


def _summary(program: schema.Program, methods: Sequence[MethodReport]) -> ProgramSummary:
    delegate_calls: Dict[str, int] = collections.Counter()
    engines: Dict[str, int] = collections.Counter()
    buffers: Dict[object, int] = {}
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
        zero_copy=all(m.state_bytes_copied_per_call == 0 and m.input_bytes_copied_per_call == 0
                      for m in methods),
        engines=dict(engines),
        engine_summary=_engine_summary(methods),
    )


# --- text ----------------------------------------------------------------------------------

_COLUMNS = ("name", "dtype", "shape", "bytes", "update", "copied/call")


def _counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"


def _engines_line(delegates: Sequence[DelegateReport]) -> str:
    """``"engines: portable x1 (nested ExecuTorch program with XNNPACK, on the CPU)"``: each
    engine of the ``TensorRTBackend`` delegates with how many it runs and what it is."""
    groups: Dict[Tuple[str, str], int] = collections.Counter(
        (d.engine or UNKNOWN_ENGINE, d.engine_description) for d in delegates
        if d.backend == BACKEND_ID)
    return "engines: " + (", ".join(f"{engine} x{n} ({what})"
                                    for (engine, what), n in groups.items())
                          or f"none (no {BACKEND_ID} delegate)")


def _delegate_line(d: DelegateReport) -> str:
    text = f"delegate {d.index}: {d.backend}, {d.calls} call{'s' if d.calls != 1 else ''}"
    if d.engine is not None:
        text += (f", {d.engine} engine, {d.inputs} inputs, {d.outputs} outputs, "
                 f"{d.aliased_outputs} aliased")
    if d.dynamic:
        text += f", dynamic {', '.join(d.dynamic)}"
    if d.note:
        text += f" ({d.note})"
    return text


def _state_table(entries: Sequence[StateReport], indent: str) -> List[str]:
    rows = [_COLUMNS] + [(s.name, s.dtype, str(list(s.shape)), str(s.nbytes), s.update,
                          str(s.bytes_copied_per_call)) for s in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    right = {3, 5}  # numbers
    lines = []
    for row in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        lines.append(indent + "  ".join(cells).rstrip())
    for s in entries:
        if s.delegate_bytes_copied_per_call:
            lines.append(f"{indent}note: {s.name}: {s.delegate_bytes_copied_per_call} of its "
                         "bytes copied per call are the delegate's reflect copy (its aliased "
                         "output is a separate value; finalise with "
                         "executorch_trt.backend_config(), in-place planning on, to update it "
                         "in place)")
        if s.functional_update_bytes_per_call:
            lines.append(f"{indent}note: {s.name}: out-of-place updates copy "
                         f"{s.functional_update_bytes_per_call} bytes per call inside kernels")
    return lines


def _format_method(m: MethodReport) -> List[str]:
    lines = [f"method {m.name}",
             f"  delegate calls: {_counts(m.delegate_calls)}"]
    lines += [f"    {_delegate_line(d)}" for d in m.delegates]
    lines.append(f"  {_engines_line(m.delegates)}")
    lines.append(f"  operators outside delegates: {_counts(m.operators)}")
    if m.state:
        lines.append(f"  state: {len(m.state)} buffer{'s' if len(m.state) != 1 else ''}, "
                     f"{m.state_bytes} bytes")
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
    lines = [f"executorch_trt.inspect: {report.source} ({size}{s.methods} "
             f"method{'s' if s.methods != 1 else ''}; {s.engine_summary})"]
    for m in report.methods:
        lines += [""] + _format_method(m)
    copied = ", ".join(f"{name} {n}" for name, n in s.state_bytes_copied_per_call.items())
    lines += ["", "summary",
              f"  delegate calls: {_counts(s.delegate_calls)}",
              f"  {_engines_line([d for m in report.methods for d in m.delegates])}",
              f"  operator calls outside delegates: {s.operators_outside_delegates}",
              f"  state: {s.state_buffers} buffer{'s' if s.state_buffers != 1 else ''}, "
              f"{s.state_bytes} bytes",
              f"  state bytes copied per call: {copied or 'no methods'}",
              "  zero copy: " + ("yes" if s.zero_copy else
                                 "no (state is copied on some calls)")]
    return "\n".join(lines)
