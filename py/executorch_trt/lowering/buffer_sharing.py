"""Which mutable buffers the methods of one program share, and when that is refused.

Where sharing comes from: ``executorch_trt.export`` finalises a multi-method program with
ExecuTorch's ``MemoryPlanningPass(share_mutable_buffers=True)`` (needed for prefill/decode
sharing, and for the Python runtime, whose methods share memory arenas). That pass
(``_insert_mutable_buffer_specs`` / ``run_multimethod`` in
``executorch/exir/passes/memory_planning_pass.py``) gives every buffer *FQN* that is mutated in
at least one method one offset in one shared arena, in every method that mutates or reads it,
sized for the first of them. It never compares the buffers: by name alone.

The rule, checked by ``check_buffer_sharing`` before lowering:

* A buffer FQN that some method mutates and that another method also has (mutated or read) is
  *shared* between them.
* Sharing is right when the buffers are the same model's state: the same FQN **and** the same
  shape, dtype and initial value, **and** the same tensor, i.e. every method was exported from
  one module instance. ``torch.export`` keeps the module's own buffer tensors in
  ``ep.state_dict`` (persistent buffers) and ``ep.constants`` (non-persistent ones, e.g. the
  ``transformers`` static caches), so two methods exported from one instance hold the *same
  storage* (checked: strict and non-strict ``torch.export.export``, and
  ``TorchExportableModuleForDecoderOnlyLM(...).export()`` called twice on one wrapper);
  methods exported from two instances hold two storages, even when the values are equal.
* Different shape or dtype: always ``ValueError`` (ExecuTorch would place both at one offset
  sized for one of them: memory corruption).
* Different initial value: always ``ValueError`` (which value a fresh load starts from would
  depend on the order the methods are loaded in).
* Equal shape, dtype and value but different storage (two module instances, e.g. two modules
  that both happen to have a zero ``cache``, or two ``transformers`` export wrappers of one
  model): ``ValueError`` unless the caller opted in with ``share_mutable_buffers=True`` given
  explicitly ("share by name, I know").

The fixes the errors name: export every method from one module instance (to share on purpose);
rename the buffer in one module (to keep them apart); or export the methods as separate
programs. Buffers that no method mutates are constants, never shared state: not checked.

Without sharing (``share_mutable_buffers=False`` or ``alloc_mutable_buffers=False``), a buffer
that one method writes is a constant of a method that only reads it: the reader would read the
exported value on every call and no binding would reach it. ``check_unshared_readers`` refuses
such a program, in the partitioner (``executorch_trt.export``) and again when it is emitted
(``emitter_fixes``: the composable path's ``backend_config(share_mutable_buffers=False)``).

The converse, *same storage under different names*, is checked too (always, whatever
``share_by_name`` says): two methods whose buffers of different FQNs hold overlapping memory of
one tensor storage, where at least one method mutates either name. Typically one model held by
two export wrappers under different attribute names (the prefill wrapper stores it as
``self.model``, the decode wrapper as ``self.m``: FQNs ``model.cache`` and ``m.cache``). Eager
PyTorch shares the cache between the two; ExecuTorch, sharing by name only, would make them two
separate buffers, so decode would never see what prefill wrote (wrong numbers, silently).
``ValueError`` naming both FQNs and both methods; the fix: give the wrappers the same attribute
name for the model (both ``self.model``) so the FQNs match.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import cast

import torch
from torch.export import ExportedProgram

from executorch_trt.graph.mutations import mutated_inputs


@dataclasses.dataclass(frozen=True)
class SharedBuffer:
    """One buffer FQN that several methods share: ``methods`` in program order, and the
    methods among them that mutate it (``writers``)."""

    fqn: str
    methods: tuple[str, ...]
    writers: tuple[str, ...]


def buffer_tensor(ep: ExportedProgram, fqn: str) -> torch.Tensor | None:
    """The tensor of buffer ``fqn`` in ``ep``: ``ep.state_dict`` for a persistent buffer,
    ``ep.constants`` for a non-persistent one; ``None`` if ``ep`` holds neither."""
    if fqn in ep.state_dict:
        return cast(torch.Tensor, ep.state_dict[fqn])
    return cast(torch.Tensor | None, ep.constants.get(fqn))


def shared_buffers(programs: Mapping[str, ExportedProgram]) -> list[SharedBuffer]:
    """The buffers ExecuTorch's ``share_mutable_buffers=True`` would share among
    ``programs`` (``{method: ExportedProgram}``): every buffer FQN mutated in at least one
    method and present (``graph_signature.buffers``) in at least two. Raises nothing."""
    present: dict[str, list[str]] = {}
    writers: dict[str, list[str]] = {}
    for method, ep in programs.items():
        for fqn in ep.graph_signature.buffers:
            present.setdefault(fqn, []).append(method)
        for fqn in mutated_inputs(ep).buffers:
            writers.setdefault(fqn, []).append(method)
    return [
        SharedBuffer(fqn, tuple(methods), tuple(writers[fqn]))
        for fqn, methods in present.items()
        if len(methods) > 1 and fqn in writers
    ]


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    return (
        a.device == b.device
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    )


def _value_difference(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """``None`` if ``a`` and ``b`` (same shape and dtype) hold the same bits, else where they
    first differ."""
    if a.device.type == "meta" or b.device.type == "meta":
        return "cannot be compared (meta tensors)"
    flat_a = a.detach().reshape(-1).contiguous()
    flat_b = b.detach().reshape(-1).contiguous()
    if torch.equal(flat_a.view(torch.uint8), flat_b.view(torch.uint8)):
        return None
    differ = flat_a != flat_b
    if not bool(differ.any()):  # only the bits differ, e.g. NaN payloads or -0.0 vs 0.0
        return "differ bitwise"
    index = int(differ.nonzero()[0, 0])
    position = list(torch.unravel_index(torch.tensor(index), a.shape)) if a.dim() else []
    return (
        f"differ at index {[int(p) for p in position]}: {flat_a[index].item()!r} vs "
        f"{flat_b[index].item()!r}"
    )


def _role(buffer: SharedBuffer, method: str) -> str:
    return "writes" if method in buffer.writers else "reads"


def _fix(explicit_ok: bool) -> str:
    opt_in = (
        (
            " (or, if they are the same model's state on purpose, pass "
            "share_mutable_buffers=True to share it by name)"
        )
        if explicit_ok
        else ""
    )
    return (
        "To share it on purpose (e.g. prefill and decode of one model), export both methods "
        f"from one module instance{opt_in}. To keep them apart, rename the buffer in one of the "
        "modules (register_buffer under another name), or export the methods as separate "
        "programs (one executorch_trt.export call each)."
    )


@dataclasses.dataclass(frozen=True)
class _HeldBuffer:
    """Buffer ``fqn`` of ``method``: its tensor and whether ``method`` mutates it."""

    method: str
    fqn: str
    tensor: torch.Tensor
    writes: bool


def _storage_range(t: torch.Tensor) -> tuple[object, int, int] | None:
    """``(storage key, first byte, end byte)`` of the memory ``t`` covers in its storage, or
    ``None`` when it has none to compare (no elements, a meta/fake tensor, no data). ``t`` is
    strided (``_check_one_storage_one_name`` refuses other layouts first)."""
    if t.device.type == "meta" or t.numel() == 0:
        return None
    base = t.untyped_storage().data_ptr()
    if base == 0:
        return None
    extent = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    start = t.storage_offset() * t.element_size()
    return ((t.device, base), int(start), int(start + extent * t.element_size()))


def _common_suffix(a: str, b: str) -> tuple[str, str, str]:
    """Splits two FQNs into (prefix of ``a``, prefix of ``b``, common dotted suffix)."""
    parts_a, parts_b = a.split("."), b.split(".")
    n = 0
    while n < min(len(parts_a), len(parts_b)) and parts_a[-1 - n] == parts_b[-1 - n]:
        n += 1
    return (
        ".".join(parts_a[: len(parts_a) - n]),
        ".".join(parts_b[: len(parts_b) - n]),
        ".".join(parts_a[len(parts_a) - n :]),
    )


def _check_one_storage_one_name(programs: Mapping[str, ExportedProgram]) -> None:
    """Raises ``ValueError`` when two methods hold overlapping memory of one tensor storage as
    buffers of different FQNs and some method mutates either name (module docstring): ExecuTorch
    would make them two buffers, so one method's writes would not reach the other."""
    held: list[_HeldBuffer] = []
    mutated: set[str] = set()
    for method, ep in programs.items():
        writes = mutated_inputs(ep).buffers
        mutated.update(writes)
        for fqn in ep.graph_signature.buffers:
            tensor = buffer_tensor(ep, fqn)
            if not isinstance(tensor, torch.Tensor):
                continue
            if tensor.layout != torch.strided:
                if len(programs) == 1:
                    continue  # no other method to share it with
                # No storage to compare: whether another method holds it under another name
                # (and would never see its writes) cannot be checked.
                raise ValueError(
                    f"executorch_trt: buffer {fqn!r} of method {method!r} is a "
                    f"{tensor.layout} tensor; with several methods every buffer must be dense "
                    "(strided) so that one tensor held under two names can be found. Register "
                    "it dense (tensor.to_dense()) before export."
                )
            held.append(_HeldBuffer(method, fqn, tensor, fqn in writes))
    by_storage: dict[object, list[tuple[_HeldBuffer, int, int]]] = {}
    for h in held:
        where = _storage_range(h.tensor)
        if where is not None:
            by_storage.setdefault(where[0], []).append((h, where[1], where[2]))
    conflicts = []
    for entries in by_storage.values():
        for i, (a, a_start, a_end) in enumerate(entries):
            for b, b_start, b_end in entries[i + 1 :]:
                if a.method == b.method or a.fqn == b.fqn:
                    continue
                if a_start >= b_end or b_start >= a_end:  # disjoint parts of one storage
                    continue
                if a.fqn in mutated or b.fqn in mutated:
                    conflicts.append((a, b))
    if not conflicts:
        return
    # Report a pair where one of the two methods itself writes, if there is one.
    a, b = min(conflicts, key=lambda pair: not (pair[0].writes or pair[1].writes))
    if b.writes and not a.writes:
        a, b = b, a
    prefix_a, prefix_b, suffix = _common_suffix(a.fqn, b.fqn)
    if prefix_a and prefix_b and suffix:
        example = (
            f" (the wrappers hold the model as {prefix_a!r} and {prefix_b!r}: store it as "
            f"{prefix_a!r} in both, so both methods have {a.fqn!r})"
        )
    else:
        example = ""

    def role(h: _HeldBuffer) -> str:
        return "writes" if h.writes else "reads"

    raise ValueError(
        f"executorch_trt: methods {a.method!r} and {b.method!r} hold the same tensor "
        f"under different names: buffer {a.fqn!r} in {a.method!r} (which {role(a)} it) and "
        f"{b.fqn!r} in {b.method!r} (which {role(b)} it). ExecuTorch shares mutable buffers "
        "across methods by name only, so the program would hold two separate buffers and what "
        "one method writes the other would never see (eager PyTorch shares them). Give the "
        "export wrappers the same attribute name for the model (e.g. both `self.model`), so "
        f"the buffer has one FQN in every method{example}."
    )


def check_buffer_sharing(
    programs: Mapping[str, ExportedProgram], *, share_by_name: bool = False
) -> list[SharedBuffer]:
    """Checks that every buffer ``programs`` would share is one model's state (the rule in the
    module docstring) and returns the shared buffers.

    Args:
        programs: ``{method name: ExportedProgram}`` as given to ``executorch_trt.export``.
        share_by_name: the caller passed ``share_mutable_buffers=True`` explicitly: buffers of
            equal shape, dtype and initial value are shared even when they come from different
            module instances.

    Raises ``ValueError`` naming the buffer, both methods (which one writes it), what differs
    (shapes, dtypes, initial values, or module instances) and how to fix it; and, whatever
    ``share_by_name`` says, naming both FQNs and both methods when two methods hold one
    tensor's storage under different names and either name is mutated (one model held by two
    wrappers under different attribute names: ExecuTorch would keep two separate buffers).
    """
    _check_one_storage_one_name(programs)
    shared = shared_buffers(programs)
    for buffer in shared:
        ref_method = buffer.writers[0]
        ref = buffer_tensor(programs[ref_method], buffer.fqn)
        for method in buffer.methods:
            if method == ref_method:
                continue
            other = buffer_tensor(programs[method], buffer.fqn)
            if ref is None or other is None or _same_tensor(ref, other):
                continue
            head = (
                f"executorch_trt: buffer {buffer.fqn!r} would be shared by methods "
                f"{ref_method!r} (which {_role(buffer, ref_method)} it) and {method!r} (which "
                f"{_role(buffer, method)} it): ExecuTorch shares a mutable buffer across "
                "methods by name (share_mutable_buffers)"
            )
            if ref.shape != other.shape or ref.dtype != other.dtype:
                what = []
                if ref.shape != other.shape:
                    what.append(f"shapes {list(ref.shape)} vs {list(other.shape)}")
                if ref.dtype != other.dtype:
                    what.append(f"dtypes {ref.dtype} vs {other.dtype}")
                raise ValueError(
                    f"{head}, but the two buffers differ ({', '.join(what)}), so they are not "
                    "the same model's state and one would overwrite the other's memory. "
                    + _fix(explicit_ok=False)
                )
            difference = _value_difference(ref, other)
            if difference is not None:
                raise ValueError(
                    f"{head}, but their initial values {difference}, so they are not the same "
                    "model's state (and a fresh load would start from whichever method loads "
                    "last). " + _fix(explicit_ok=False)
                )
            if not share_by_name:
                raise ValueError(
                    f"{head}. They have the same shape {list(ref.shape)}, dtype {ref.dtype} and "
                    "initial value but are different tensors (exported from different module "
                    f"instances), so what {method!r} writes, {ref_method!r} would read. "
                    + _fix(explicit_ok=True)
                )
    return shared


def unshared_reason(alloc_mutable_buffers: bool) -> str:
    """Which option keeps a program's methods from sharing mutable buffers, for messages."""
    if not alloc_mutable_buffers:
        return "alloc_mutable_buffers=False: ExecuTorch cannot share unplanned buffers"
    return "share_mutable_buffers=False"


def check_unshared_readers(programs: Mapping[str, ExportedProgram], reason: str) -> None:
    """Refuses a method that only reads a buffer another method writes, in a program whose
    methods do not share mutable buffers (``reason`` says which option turned sharing off).

    Unshared, such a buffer is a constant of the reading method (``docs/contract.md`` 1): it
    reads the exported value on every call, never what the writer wrote, and binding the
    buffer (``bind_buffer``, ``bind_state``, C++ ``set_buffer``) reaches only the methods that
    write it. Raises ``ValueError`` naming the buffer, both methods and the fixes.
    """
    for buffer in shared_buffers(programs):
        readers = [m for m in buffer.methods if m not in buffer.writers]
        if readers:
            raise ValueError(
                f"executorch_trt: method {readers[0]!r} reads buffer {buffer.fqn!r}, which "
                f"method {buffer.writers[0]!r} updates, but the methods do not share mutable "
                f"buffers ({reason}): {readers[0]!r} would read the buffer's exported value on "
                f"every call, never the update, and binding the buffer would not reach it. "
                "Export with share_mutable_buffers and alloc_mutable_buffers left at their "
                f"defaults (the methods then share it), or export {readers[0]!r} as a separate "
                "program."
            )


def _delegate_buffers(ep: ExportedProgram) -> set[str]:
    """The buffer FQNs frozen into ``ep``'s delegates of this backend (a buffer its partition
    took whole as a constant: ``TensorRTPartitioner(freeze_buffers=True)``)."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    from executorch_trt.format.wire import BACKEND_ID

    return {
        fqn
        for module in ep.graph_module.modules()
        if isinstance(module, LoweredBackendModule) and module.backend_id == BACKEND_ID
        for fqn in module.original_module.graph_signature.inputs_to_buffers.values()
    }


def check_frozen_buffers(programs: Mapping[str, ExportedProgram]) -> None:
    """Refuses a program in which a buffer that one method updates was frozen into another
    method's delegate (``TensorRTPartitioner(freeze_buffers=True)`` sees one method at a time):
    that method would read the buffer's exported value on every call, never the update, as
    an unshared reader does (``check_unshared_readers``). Raises ``ValueError`` naming the
    buffer, both methods and the fixes."""
    written = {
        fqn: method
        for method, ep in programs.items()
        for fqn in ep.graph_signature.buffers_to_mutate.values()
    }
    for method, ep in programs.items():
        for fqn in sorted(_delegate_buffers(ep) & written.keys()):
            raise ValueError(
                f"executorch_trt: buffer {fqn!r}, which method {written[fqn]!r} updates, was "
                f"frozen into method {method!r}'s delegate (TensorRTPartitioner("
                f"freeze_buffers=True)): {method!r} would read the buffer's exported value on "
                "every call, never the update, and binding the buffer would not reach it. "
                "Leave freeze_buffers=False (the default) for a program whose methods share "
                f"state, or export {method!r} as a separate program."
            )
