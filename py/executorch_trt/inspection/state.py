"""One method's state, read off its execution plan (nothing is run): which values are state,
how each is updated on every call and the bytes a call copies into it, and the same for method
inputs the program writes back (``MethodAnalysis``, the core of ``executorch_trt.inspect``).

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
  kernels come from the operator schema (``plan.kernel_effects``), of
  ``TensorRTBackend`` calls from the blob's input/output counts. For a delegate of another
  backend only a value passed twice is known to be read; its other arguments count as written,
  so a buffer that only such a delegate reads, in a program exported without names, initial
  values or shared buffers, is not recognised.

**How state is updated** (``update``; the first that applies):

* ``written_back``: an ExecuTorch copy kernel (``plan.COPY_KERNELS``:
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
from collections.abc import Sequence

from executorch.exir import schema

from executorch_trt.inspection import plan as pa
from executorch_trt.inspection.delegates import delegate_reports
from executorch_trt.inspection.report import (
    IN_PLACE_DELEGATE,
    IN_PLACE_KERNEL,
    READ_ONLY,
    WRITTEN_BACK,
    MethodReport,
    StateReport,
)


class MethodAnalysis:
    """Walks one plan once: reads/writes of every instruction, then state and its writers."""

    def __init__(self, program: schema.Program, plan: schema.ExecutionPlan) -> None:
        self.plan = plan
        self.inputs: set[int] = set(plan.inputs)
        self.delegates, self.metadata = delegate_reports(program, plan)
        self.operators: dict[str, int] = collections.Counter()
        self.read_before_write: set[int] = set()
        self.delegate_in_place: dict[int, list[str]] = collections.defaultdict(list)
        #: value -> [(bytes, description)] of the delegate's reflect copies of it per call.
        self.delegate_copies: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
        self.kernel_writes: dict[int, list[str]] = collections.defaultdict(list)
        self._walk()

    def _delegate_effects(
        self, call: schema.DelegateCall, written: set[int]
    ) -> tuple[list[int], list[int]]:
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
            ins, outs = args[: len(meta.inputs)], args[len(meta.inputs) :]
            for j, v in enumerate(outs):
                # Only a state value or a method input is ever looked up in delegate_in_place.
                if v in ins:
                    self.delegate_in_place[v].append(
                        f"{who} (output '{meta.outputs[j].name}' is its input "
                        f"'{meta.inputs[ins.index(v)].name}')"
                    )
                else:
                    self.delegate_in_place[v].append(
                        f"{who} (output '{meta.outputs[j].name}' is stored in it)"
                    )
            for alias in meta.aliased_io:
                j = [b.name for b in meta.outputs].index(alias.output)
                i = [b.name for b in meta.inputs].index(alias.input)
                if outs[j] != ins[i]:
                    self.delegate_in_place[ins[i]].append(
                        f"{who} (aliased_io: output '{alias.output}' is stored in input "
                        f"'{alias.input}', {alias.kind})"
                    )
                if self._storage(outs[j]) != self._storage(ins[i]):
                    # BindingPlan::Execute: the updated input is copied into the separate
                    # output tensor ExecuTorch passed, on every call.
                    out_tensor = pa.tensor_at(self.plan, outs[j])
                    nbytes = pa.tensor_nbytes(out_tensor) if out_tensor is not None else 0
                    self.delegate_copies[ins[i]].append(
                        (
                            nbytes,
                            (
                                f"{who} reflect copy: it copies updated input '{alias.input}' "
                                f"into output '{alias.output}' "
                                f"({pa.describe_value(self.plan, outs[j])}, a separate value), "
                                f"{nbytes} bytes"
                            ),
                        )
                    )
            return ins, outs
        counts = collections.Counter(args)
        twice = [v for v, n in counts.items() if n > 1]
        for v in twice:
            self.delegate_in_place[v].append(f"{who} (passed as input and output)")
        once = [v for v, n in counts.items() if n == 1]
        return twice + [v for v in once if v in written or v in self.inputs], twice + [
            v for v in once if v not in written and v not in self.inputs
        ]

    def _storage(self, value: int) -> tuple[str, int] | tuple[str, int, int]:
        """Where a value's data lives: (arena, offset) when memory-planned, else the value id.
        ExecuTorch emits a view (``view_copy`` removed by memory planning) as a second value
        with its base's arena and offset, so a view and its base share a key."""
        tensor = pa.tensor_at(self.plan, value)
        if tensor is not None and tensor.allocation_info is not None:
            return ("arena", tensor.allocation_info.memory_id, tensor.allocation_info.memory_offset)
        return ("value", value)

    def _walk(self) -> None:
        written: set[int] = set()
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
                if (
                    v not in written
                    and v not in self.inputs
                    and self._storage(v) not in storage_written
                ):
                    self.read_before_write.add(v)
            written.update(writes)
            storage_written.update(self._storage(v) for v in writes)

    def _evidence(self, value: int, tensor: schema.Tensor, copy_dests: set[int]) -> list[str]:
        allocation = tensor.allocation_info
        planned = allocation is not None
        evidence = []
        if pa.tensor_fqn(tensor):
            evidence.append("name")
        if planned and tensor.data_buffer_idx > 0:
            evidence.append("initial_value")
        if (
            allocation is not None
            and allocation.memory_id == 2
            and len(self.plan.non_const_buffer_sizes) == 3
        ):
            evidence.append("shared_arena")
        if value in copy_dests and value not in self.inputs:
            evidence.append("write_back")
        if planned and value in self.read_before_write:
            evidence.append("read_before_write")
        return evidence

    def _state_entry(
        self,
        values: Sequence[int],
        evidence: Sequence[str],
        copies: Sequence[pa.Copy],
        functional: Sequence[pa.Copy],
        name: str,
    ) -> StateReport:
        """The report of the buffer whose value is ``values[0]``; ``values[1:]`` are views of
        it (same storage), whose writers count as the buffer's."""
        group = set(values)
        tensor = pa.state_tensor(self.plan, values[0])
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
        writers = (
            [
                f"{c.op} from {pa.describe_value(self.plan, c.source)}, {c.nbytes} bytes"
                for c in write_backs
            ]
            + kernel_writers
            + delegate_writers
            + [text for _, text in reflects]
        )
        delegate_bytes = sum(n for n, _ in reflects)
        return StateReport(
            name=name,
            fqn=pa.tensor_fqn(tensor),
            value=values[0],
            dtype=pa.dtype_name(tensor),
            shape=pa.sizes(tensor),
            nbytes=pa.tensor_nbytes(tensor),
            update=update,
            bytes_copied_per_call=sum(c.nbytes for c in write_backs) + delegate_bytes,
            functional_update_bytes_per_call=sum(f.nbytes for f in functional if f.source in group),
            updated_by=tuple(writers),
            evidence=tuple(evidence),
            views=tuple(values[1:]),
            delegate_bytes_copied_per_call=delegate_bytes,
        )

    def _base_first(self, values: Sequence[int]) -> list[int]:
        """The buffer itself first (named, else initialised, else the largest, else the first
        value), then its views."""

        def rank(v: int) -> tuple[bool, bool, int, int]:
            t = pa.state_tensor(self.plan, v)
            return (pa.tensor_fqn(t) is not None, t.data_buffer_idx > 0, pa.tensor_nbytes(t), -v)

        base = max(values, key=rank)
        return [base, *sorted(v for v in values if v != base)]

    def report(self) -> MethodReport:
        plan = self.plan
        copies, functional = pa.copies(plan), pa.functional_updates(plan)
        copy_dests = {c.destination for c in copies}
        written_inputs = []
        groups: dict[object, list[int]] = collections.defaultdict(list)
        evidence: dict[int, list[str]] = {}
        for value, evalue in enumerate(plan.values):
            tensor = evalue.val
            if not isinstance(tensor, schema.Tensor):
                continue
            if value in self.inputs:
                if (
                    value in copy_dests
                    or value in self.delegate_in_place
                    or value in self.kernel_writes
                ):
                    name = (
                        f"input {plan.inputs.index(value)} "
                        + pa.describe_value(plan, value).split(" ", 2)[2]
                    )
                    written_inputs.append(
                        self._state_entry([value], ["method_input"], copies, functional, name)
                    )
                continue
            evidence[value] = self._evidence(value, tensor, copy_dests)
            if evidence[value]:
                groups[self._storage(value)].append(value)
        state = []
        for values in groups.values():
            values = self._base_first(values)
            rules = [rule for rule in _EVIDENCE if any(rule in evidence[v] for v in values)]
            name = pa.tensor_fqn(pa.state_tensor(plan, values[0])) or pa.describe_value(
                plan, values[0]
            )
            state.append(self._state_entry(values, rules, copies, functional, name))
        state.sort(key=lambda s: s.value)
        return MethodReport(
            plan.name,
            tuple(self.delegates),
            dict(self.operators),
            tuple(state),
            tuple(written_inputs),
        )


_EVIDENCE = ("name", "initial_value", "shared_arena", "write_back", "read_before_write")
