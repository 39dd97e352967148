"""A fix for a verified ExecuTorch 1.5.1 emitter bug that gives wrong numbers silently: with
``emit_mutable_buffer_names=True``, a mutable buffer's initial value can be another buffer's.

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
"""

from __future__ import annotations

import functools
from importlib import metadata

from executorch.exir.emit import _emitter
from executorch.exir.schema import TensorDataLocation

VERIFIED_VERSION = "1.5.1"
_MARK = "_executorch_trt_named_mutable_data_fix"


def _is_planned_data_in_program(spec) -> bool:
    info = spec.extra_tensor_info
    return (bool(spec.const) and spec.mem_id is not None and spec.mem_offset is not None
            and info is not None and info.location == TensorDataLocation.SEGMENT)


def apply() -> bool:
    """Installs the fix (idempotent). Returns whether the emitter carries it: ``False`` on an
    ExecuTorch version other than ``VERIFIED_VERSION`` (nothing is patched there)."""
    original = _emitter._Emitter._tensor_spec_to_evalue
    if getattr(original, _MARK, False):
        return True
    if metadata.version("executorch") != VERIFIED_VERSION:
        return False

    @functools.wraps(original)
    def tensor_spec_to_evalue(self, spec, constant_tag=None):
        if not _is_planned_data_in_program(spec):
            return original(self, spec, constant_tag)
        info = spec.extra_tensor_info
        spec.extra_tensor_info = None
        try:
            evalue = original(self, spec, constant_tag)
        finally:
            spec.extra_tensor_info = info
        evalue.val.extra_tensor_info = info
        return evalue

    setattr(tensor_spec_to_evalue, _MARK, True)
    _emitter._Emitter._tensor_spec_to_evalue = tensor_spec_to_evalue
    return True
