"""Fixes for the ExecuTorch 1.5.1 emitter: a verified bug that gives wrong numbers silently,
a check it lacks before sharing buffers by name, and a warning it gives for every program with
an initialised mutable buffer.

**Named mutable data.** With ``emit_mutable_buffer_names=True``, a mutable buffer's initial
value can be another buffer's.

``_Emitter._tensor_spec_to_evalue`` (``exir/emit/_emitter.py``, 1.5.1 and upstream as of
2026-08) deduplicates serialised tensor data by content. A memory-planned tensor with data (a
mutable buffer with an initial value, ``et_init_buffer``) is looked up in the *mutable-data*
map only when ``spec.extra_tensor_info is None``; emitting buffer names sets
``extra_tensor_info``, so the lookup falls through to the *constant* map, while a miss still
saves into the mutable data. When a constant with the same bytes was emitted earlier (a
``torch.ones(4)`` buffer ``init`` next to a mutable ``torch.ones(4)`` buffer ``b``), the
mutable buffer gets the constant's index, which the runtime reads as an index into the
mutable data: ``b`` starts from another buffer's value. Verified with ``Reset`` in
``tests/py/write_forms_test.py``: names off 12, names on 52, eager 12.

``apply()`` (run once when ``executorch_trt`` is imported) wraps that method so a planned
tensor whose data lives in the program (``TensorDataLocation.SEGMENT``) is looked up and
saved with ``extra_tensor_info`` cleared, i.e. exactly as without names, and gets its
``extra_tensor_info`` (the name) back on the emitted tensor. Everything else goes through
unchanged. It patches only the ExecuTorch version it was verified on (``VERIFIED_VERSION``);
``//tests/py:emitter_fixes_test`` fails if the pin moves, so the bug is re-checked then.

**Buffers shared by name.** ExecuTorch shares a mutable buffer across methods by its name
alone, so two methods exported from different module instances would silently share state.
``TensorRTPartitioner`` refuses that when it sees all methods; when it does not (one
partitioner per method, ``to_edge`` + ``to_backend``), the methods ``InplaceMemoryPlanningPass``
planned with sharing are checked (``buffer_sharing.check_buffer_sharing``) when the program is
emitted, the one place that holds every method's buffer values.

**The initial-state warning.** ``_TopLevelEmitter._find_fqn_for_placeholder`` warns "Mutation on a
buffer in the model is detected. ExecuTorch assumes buffers that are mutated in the graph have
a meaningless initial state ... unless a pass which sets meta["et_init_buffer"] to True ... is
run" at the first mutated buffer of each method, whether or not that pass ran. ``apply()``
also wraps it so the warning is dropped (``warnings.catch_warnings``, around that one call) for
a buffer whose initial state is defined: ``et_init_buffer`` (its value is serialised) or
``executorch_trt_zero_initial_value`` (all zeros, left to the zero-filled planned memory,
``passes/initialize_mutable_buffers.py``). A buffer with neither still warns, and
``EXECUTORCH_TRT_VERBOSE=1`` (``quiet.py``) keeps every warning.
"""

from __future__ import annotations

import functools
import warnings
from importlib import metadata
from typing import Any, cast

from executorch.exir.emit import _emitter
from executorch.exir.schema import EValue, Tensor, TensorDataLocation
from executorch.exir.tensor import TensorSpec

from executorch_trt import quiet
from executorch_trt.lowering.buffer_sharing import (
    check_buffer_sharing,
    check_frozen_buffers,
    check_unshared_readers,
)
from executorch_trt.lowering.memory_planning import SHARES_BUFFERS, UNSHARED_BUFFERS

VERIFIED_VERSION = "1.5.1"
_MARK = "_executorch_trt_named_mutable_data_fix"
_WARNING_MARK = "_executorch_trt_initialized_buffer_warning_fix"
_SHARING_MARK = "_executorch_trt_buffer_sharing_check"
# node.meta keys of a mutable buffer whose initial state is defined (see the docstring); the
# second is passes/initialize_mutable_buffers.py's ZERO_INITIAL_VALUE.
_DEFINED_INITIAL_STATE = ("et_init_buffer", "executorch_trt_zero_initial_value")
_INITIAL_STATE_WARNING = r"Mutation on a buffer in the model is detected\."


def _is_planned_data_in_program(spec: TensorSpec) -> bool:
    info = spec.extra_tensor_info
    return (
        bool(spec.const)
        and spec.mem_id is not None
        and spec.mem_offset is not None
        and info is not None
        and info.location == TensorDataLocation.SEGMENT
    )


def apply() -> bool:
    """Installs both fixes (idempotent). Returns whether the emitter carries them: ``False`` on
    an ExecuTorch version other than ``VERIFIED_VERSION`` (nothing is patched there)."""
    if metadata.version("executorch") != VERIFIED_VERSION:
        return False
    _apply_named_mutable_data_fix()
    _apply_initial_state_warning_fix()
    _apply_buffer_sharing_check()
    return True


def _apply_buffer_sharing_check() -> None:
    """Before a program is emitted, the methods ``InplaceMemoryPlanningPass`` planned with
    shared mutable buffers pass ``buffer_sharing.check_buffer_sharing`` (ExecuTorch shares by
    name), and those it planned without sharing pass ``check_unshared_readers``; every
    program of several methods passes ``check_frozen_buffers`` (a buffer one method updates,
    frozen into another's delegate). Only here are all methods' buffers in one place, whichever
    partitioners (one per method, or ``to_edge`` + ``to_backend``) lowered them."""
    from executorch.exir.program import _program

    original = _program.emit_program
    if getattr(original, _SHARING_MARK, False):
        return

    @functools.wraps(original)
    def emit_program(methods: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(methods, dict):
            # {method: its mark's value} for the methods the pass planned with / without sharing.
            shared, unshared = (
                {
                    name: ep.graph_module.meta[key]
                    for name, ep in methods.items()
                    if key in ep.graph_module.meta
                }
                for key in (SHARES_BUFFERS, UNSHARED_BUFFERS)
            )
            if len(shared) > 1:
                check_buffer_sharing(
                    {name: methods[name] for name in shared}, share_by_name=any(shared.values())
                )
            if len(unshared) > 1:
                check_unshared_readers(
                    {name: methods[name] for name in unshared}, next(iter(unshared.values()))
                )
            if len(methods) > 1:
                check_frozen_buffers(methods)
        return original(methods, *args, **kwargs)

    setattr(emit_program, _SHARING_MARK, True)
    _program.emit_program = emit_program


def _apply_initial_state_warning_fix() -> None:
    original = _emitter._TopLevelEmitter._find_fqn_for_placeholder
    if getattr(original, _WARNING_MARK, False):
        return

    @functools.wraps(original)
    def find_fqn_for_placeholder(self: Any, target: str, spec: TensorSpec | None) -> Any:
        meta = self.node.meta
        if quiet.verbose() or not any(meta.get(key) for key in _DEFINED_INITIAL_STATE):
            return original(self, target, spec)
        warned = self.given_mutable_buffer_warning
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_INITIAL_STATE_WARNING, category=UserWarning)
            result = original(self, target, spec)
        # Not warned for this buffer: a later one without a defined initial state still warns.
        self.given_mutable_buffer_warning = warned
        return result

    setattr(find_fqn_for_placeholder, _WARNING_MARK, True)
    # The patch itself (mypy refuses assigning to a method).
    _emitter._TopLevelEmitter._find_fqn_for_placeholder = find_fqn_for_placeholder  # type: ignore[method-assign,assignment]


def _apply_named_mutable_data_fix() -> None:
    original = _emitter._Emitter._tensor_spec_to_evalue
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def tensor_spec_to_evalue(
        self: Any, spec: TensorSpec, constant_tag: str | None = None
    ) -> EValue:
        if not _is_planned_data_in_program(spec):
            return original(self, spec, constant_tag)
        info = spec.extra_tensor_info
        spec.extra_tensor_info = None
        try:
            evalue = original(self, spec, constant_tag)
        finally:
            spec.extra_tensor_info = info
        cast(Tensor, evalue.val).extra_tensor_info = info  # a tensor spec's value
        return evalue

    setattr(tensor_spec_to_evalue, _MARK, True)
    # The patch itself (mypy refuses assigning to a method).
    _emitter._Emitter._tensor_spec_to_evalue = tensor_spec_to_evalue  # type: ignore[method-assign]
