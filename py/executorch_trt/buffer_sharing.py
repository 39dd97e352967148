"""Which mutable buffers the methods of one program share, and when that is refused.

Where sharing comes from: ``executorch_trt.export`` finalises a multi-method program with
ExecuTorch's ``MemoryPlanningPass(share_mutable_buffers=True)`` (needed for prefill/decode
sharing, and for the Python runtime, whose methods share memory arenas). That pass
(``_insert_mutable_buffer_specs`` / ``run_multimethod`` in
``executorch/exir/passes/memory_planning_pass.py``) gives every buffer *FQN* that is mutated in
at least one method one offset in one shared arena, in every method that mutates or reads it,
sized for the first of them. It never compares the buffers: by name alone.

The rule (issue 9, item 6), checked by ``check_buffer_sharing`` before lowering:

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
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from torch.export import ExportedProgram

from executorch_trt.graph_mutations import mutated_inputs


@dataclasses.dataclass(frozen=True)
class SharedBuffer:
    """One buffer FQN that several methods share: ``methods`` in program order, and the
    methods among them that mutate it (``writers``)."""

    fqn: str
    methods: Tuple[str, ...]
    writers: Tuple[str, ...]


def buffer_tensor(ep: ExportedProgram, fqn: str) -> Optional[torch.Tensor]:
    """The tensor of buffer ``fqn`` in ``ep``: ``ep.state_dict`` for a persistent buffer,
    ``ep.constants`` for a non-persistent one; ``None`` if ``ep`` holds neither."""
    if fqn in ep.state_dict:
        return ep.state_dict[fqn]
    return ep.constants.get(fqn)


def shared_buffers(programs: Mapping[str, ExportedProgram]) -> List[SharedBuffer]:
    """The buffers ExecuTorch's ``share_mutable_buffers=True`` would share among
    ``programs`` (``{method: ExportedProgram}``): every buffer FQN mutated in at least one
    method and present (``graph_signature.buffers``) in at least two. Raises nothing."""
    present: Dict[str, List[str]] = {}
    writers: Dict[str, List[str]] = {}
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
    return (a.device == b.device and a.dtype == b.dtype and a.shape == b.shape
            and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _value_difference(a: torch.Tensor, b: torch.Tensor) -> Optional[str]:
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
    return (f"differ at index {[int(p) for p in position]}: {flat_a[index].item()!r} vs "
            f"{flat_b[index].item()!r}")


def _role(buffer: SharedBuffer, method: str) -> str:
    return "writes" if method in buffer.writers else "reads"


def _fix(explicit_ok: bool) -> str:
    opt_in = (" (or, if they are the same model's state on purpose, pass "
              "share_mutable_buffers=True to share it by name)") if explicit_ok else ""
    return (
        "To share it on purpose (e.g. prefill and decode of one model), export both methods "
        f"from one module instance{opt_in}. To keep them apart, rename the buffer in one of the "
        "modules (register_buffer under another name), or export the methods as separate "
        "programs (one executorch_trt.export call each)."
    )


def check_buffer_sharing(programs: Mapping[str, ExportedProgram], *,
                         share_by_name: bool = False) -> List[SharedBuffer]:
    """Checks that every buffer ``programs`` would share is one model's state (the rule in the
    module docstring) and returns the shared buffers.

    Args:
        programs: ``{method name: ExportedProgram}`` as given to ``executorch_trt.export``.
        share_by_name: the caller passed ``share_mutable_buffers=True`` explicitly: buffers of
            equal shape, dtype and initial value are shared even when they come from different
            module instances.

    Raises ``ValueError`` naming the buffer, both methods (which one writes it), what differs
    (shapes, dtypes, initial values, or module instances) and how to fix it.
    """
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
                f"executorch_trt.export: buffer {buffer.fqn!r} would be shared by methods "
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
                    + _fix(explicit_ok=False))
            difference = _value_difference(ref, other)
            if difference is not None:
                raise ValueError(
                    f"{head}, but their initial values {difference}, so they are not the same "
                    "model's state (and a fresh load would start from whichever method loads "
                    "last). " + _fix(explicit_ok=False))
            if not share_by_name:
                raise ValueError(
                    f"{head}. They have the same shape {list(ref.shape)}, dtype {ref.dtype} and "
                    "initial value but are different tensors (exported from different module "
                    f"instances), so what {method!r} writes, {ref_method!r} would read. "
                    + _fix(explicit_ok=True))
    return shared
