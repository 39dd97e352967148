"""The delegate's options: validated once, then carried.

* ``ExportOptions``: every option a user gives ``executorch_trt.export``, ``backend_config`` or
  ``TensorRTPartitioner``, validated once, at construction (``from_kwargs`` for keyword
  arguments). ``export`` hands the one object to the partitioner and to ``backend_config``.
* ``CompileOptions``: what ``TensorRTBackend.preprocess`` receives for one partition, through the
  ``DelegationSpec``'s compile specs (ExecuTorch serialises those): the delegate options of the
  ``ExportOptions`` plus what the partitioner found about the partition. Decoding checks the
  format only; the values were validated in the ``ExportOptions`` they came from.

Compile spec keys are UTF-8 strings, values UTF-8 bytes:

* ``engine``: ``"portable"`` (nested ExecuTorch program run on CPU) or ``"tensorrt"``
  (serialized TensorRT plan; needs TensorRT at export time).
* ``kv_cache``: ``"inplace"`` (a KV write becomes ``executorch_trt::kv_cache_update`` and its
  output is recorded as an alias of the cache input, ownership ``caller``) or ``"copy_back"``
  (no alias; the new cache is an ordinary output that ExecuTorch copies back).
* ``require_inplace`` (JSON bool): ``preprocess`` raises ``NotInPlaceError`` instead of warning
  when an in-place update still copies part of its buffer inside the engine (a write into a view
  of the cache; ``backend.aliases.AliasDecision.view_copies``).
* ``shared_inputs`` (JSON list of names): set by the partitioner per partition: names of
  partition inputs that are also read outside the partition. The engine must not update those in
  place (another reader would see the new value), so they are never aliased.
* ``portable_xnnpack`` (JSON bool): the portable engine lowers its nested program with
  ExecuTorch's XNNPACK partitioner (``engines/portable/builder.py``); ignored by other engines.
* ``external_weights`` (JSON bool): the portable engine's named data (its nested XNNPACK
  weights) goes to the external data file ``wire.EXTERNAL_WEIGHTS_TAG`` + ``.ptd`` instead of the
  ``.pte`` (``engines/portable/builder.py``).
* ``buffer_updates`` (JSON list of ``[output, input]``): set by the partitioner per partition:
  pairs where partition output ``output`` is the new value of the mutable buffer that partition
  input ``input`` carries (a ``BUFFER_MUTATION`` of the method). Only these outputs may be
  aliased: an output that is *not* a buffer's new value (e.g. a functional ``index_copy``
  returned to the user) must leave its input untouched, as eager PyTorch does.
* ``symbol_ranges`` (JSON list of ``[symbol, min, max]``): set by the partitioner: the range of
  each dynamic size (``torch.export.Dim``) of the method, from the exported program's own
  ``range_constraints`` (``executorch_trt.export`` passes them: ExecuTorch's ``to_edge``
  recomputes the ranges and raises a minimum of 0 or 1 to 2). ``preprocess`` writes them into
  the blob's ``symbols`` (format version 2).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from executorch.exir.backend.compile_spec_schema import CompileSpec

from executorch_trt.format.wire import ENGINES

KV_CACHE_INPLACE = "inplace"
KV_CACHE_COPY_BACK = "copy_back"
KV_CACHE_MODES = (KV_CACHE_INPLACE, KV_CACHE_COPY_BACK)


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """Options of ``export`` / ``backend_config`` / ``TensorRTPartitioner``.

    * ``engine``: ``"portable"`` or ``"tensorrt"`` (``format.wire.ENGINES``).
    * ``kv_cache``: ``"inplace"`` or ``"copy_back"`` (module docstring).
    * ``share_mutable_buffers``: methods exported together share one copy of each mutable buffer
      (``MemoryPlanningPass(share_mutable_buffers=True)``; required for prefill/decode sharing and
      for the Python runtime, whose methods share memory arenas). ``None`` = ``True`` when
      ``alloc_mutable_buffers`` is true (ExecuTorch cannot share unplanned buffers).
      ``export`` shares a buffer only when every method has the same tensor (one module
      instance); ``True`` given explicitly also shares equal buffers (same shape, dtype and
      initial value) of different module instances by name (``buffer_sharing``).
    * ``alloc_mutable_buffers``: plan mutable buffers in the program's arenas. ``False`` lets an
      application bind its own cache memory by name (needs ``emit_mutable_buffer_names=True``).
    * ``emit_mutable_buffer_names``: serialise mutable-buffer FQNs (``Method::get_attribute``),
      so that an application finds each buffer by name (``executorch_trt.runtime``'s
      ``Program.buffer``/``bind_buffer``, C++ ``get_attribute``). On by default; ``False``
      leaves the names out (a program without names cannot be bound from Python).
    * ``init_mutable_buffers``: a fresh load starts from each buffer's exported value
      (``et_init_buffer``); ``False`` leaves them uninitialized (ExecuTorch's default).
      ``None`` (default) = ``alloc_mutable_buffers``. With ``alloc_mutable_buffers=False`` it
      must stay off: ExecuTorch 1.5.1 then points an unplanned buffer at its initial value
      *inside the program data* (read-only when the .pte is memory-mapped: the first write
      crashes; shared by every load otherwise) instead of leaving it for the application to
      bind (verified: a segfault in the first KV write).
    * ``inplace``: remove the write-back ``copy_`` of every buffer the delegate updated in place
      (``InplaceMemoryPlanningPass``). ``False`` keeps ExecuTorch's write-back even in
      ``kv_cache="inplace"`` mode.
    * ``require_inplace``: a buffer update that would still be copied back on every call raises
      ``NotInPlaceError`` (naming the method, the buffer, the bytes and why) instead of a
      ``NotInPlaceWarning``. Needs ``kv_cache="inplace"`` and ``inplace=True``.
    * ``portable_xnnpack``: the portable engine runs what XNNPACK takes of each partition as
      nested XNNPACK delegates (on by default; ``engines/portable/builder.py``).
      State writes stay on ExecuTorch's kernels, in place. ``False`` runs the whole partition
      on ExecuTorch's CPU kernels (for comparison, or for a runtime without
      ``XnnpackBackend``). Ignored by ``engine="tensorrt"``.
    * ``external_weights``: the weights the program keeps in ExecuTorch's named data (all of
      the portable engine's: its nested XNNPACK weights and its nested programs' constants,
      each stored once per program) go to an external data file instead of the ``.pte``:
      ``ExecutorchProgramManager.write_tensor_data_to_file(dir)`` writes it as
      ``dir/model.ptd`` (``wire.EXTERNAL_WEIGHTS_TAG``); load with ``runtime.load(pte,
      data=ptd)`` or a runner's ``--data``.

    Raises ``TypeError`` for a value of the wrong type (the boolean options accept only
    ``True``/``False``, not truthy strings or numbers; ``engine``/``kv_cache`` are strings) and
    ``ValueError`` for unknown ``engine``/``kv_cache`` values or inconsistent options.
    """

    engine: str = "portable"
    kv_cache: str = KV_CACHE_INPLACE
    share_mutable_buffers: bool | None = None
    alloc_mutable_buffers: bool = True
    emit_mutable_buffer_names: bool = True
    init_mutable_buffers: bool | None = None
    inplace: bool = True
    require_inplace: bool = False
    portable_xnnpack: bool = True
    external_weights: bool = False

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            _check_type(field.name, getattr(self, field.name))
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; expected one of {ENGINES}")
        if self.kv_cache not in KV_CACHE_MODES:
            raise ValueError(
                f"unknown kv_cache mode {self.kv_cache!r}; expected one of {KV_CACHE_MODES}"
            )
        if self.share_mutable_buffers and not self.alloc_mutable_buffers:
            raise ValueError("share_mutable_buffers=True needs alloc_mutable_buffers=True")
        if self.require_inplace and (self.kv_cache != KV_CACHE_INPLACE or not self.inplace):
            raise ValueError(
                "require_inplace=True contradicts "
                + ("kv_cache='copy_back'" if self.kv_cache != KV_CACHE_INPLACE else "inplace=False")
                + ", which asks ExecuTorch to copy the caches back; drop one of the two"
            )
        if self.init_mutable_buffers and not self.alloc_mutable_buffers:
            raise ValueError(
                "init_mutable_buffers=True needs alloc_mutable_buffers=True: an unplanned "
                "buffer's memory comes from the application, which sets its initial value "
                "(ExecuTorch would point it at read-only program data instead)"
            )
        if not self.alloc_mutable_buffers and not self.emit_mutable_buffer_names:
            raise ValueError(
                "alloc_mutable_buffers=False needs emit_mutable_buffer_names=True (the "
                "application binds unplanned buffers by name)"
            )

    @property
    def initializes_mutable_buffers(self) -> bool:
        if self.init_mutable_buffers is None:
            return self.alloc_mutable_buffers
        return self.init_mutable_buffers

    @property
    def shares_mutable_buffers(self) -> bool:
        if self.share_mutable_buffers is None:
            return self.alloc_mutable_buffers
        return self.share_mutable_buffers

    @staticmethod
    def from_kwargs(**options: Any) -> ExportOptions:
        """Builds options; unknown names raise ``TypeError`` listing them."""
        known = {f.name for f in dataclasses.fields(ExportOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"executorch_trt: unknown option(s) {', '.join(unknown)}; known options: "
                f"{', '.join(sorted(known))}"
            )
        return ExportOptions(**options)

    def compile_options(
        self,
        shared_inputs: Sequence[str] = (),
        buffer_updates: Sequence[tuple[str, str]] = (),
        symbol_ranges: Sequence[tuple[str, int, int]] = (),
    ) -> CompileOptions:
        """The ``CompileOptions`` of one partition (the partitioner's findings)."""
        return CompileOptions(
            self.engine,
            self.kv_cache,
            self.require_inplace,
            tuple(shared_inputs),
            tuple(buffer_updates),
            self.portable_xnnpack,
            self.external_weights,
            tuple(symbol_ranges),
        )


_STRING_OPTIONS = frozenset({"engine", "kv_cache"})
_OPTIONAL_BOOL_OPTIONS = frozenset({"share_mutable_buffers", "init_mutable_buffers"})
# Every other ExportOptions field is a plain bool.


def _check_type(name: str, value: object) -> None:
    """``TypeError`` unless option ``name`` has the type ``ExportOptions`` documents."""
    if name in _STRING_OPTIONS:
        if not isinstance(value, str):
            raise TypeError(
                f"executorch_trt: option {name} must be a str, got {type(value).__name__} {value!r}"
            )
    elif name in _OPTIONAL_BOOL_OPTIONS:
        if value is not None and not isinstance(value, bool):
            raise TypeError(
                f"executorch_trt: option {name} must be True, False or None, got "
                f"{type(value).__name__} {value!r}"
            )
    else:
        check_bool(f"executorch_trt: option {name}", value)


def check_bool(what: str, value: object) -> None:
    """``TypeError`` naming ``what`` unless ``value`` is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, got {type(value).__name__} {value!r}")


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """One partition's compile options (module docstring): built by
    ``ExportOptions.compile_options``, carried as compile specs. A spec left out takes the
    default below (as for ``to_backend("TensorRTBackend", program, [])``)."""

    engine: str = "portable"
    kv_cache: str = KV_CACHE_INPLACE
    require_inplace: bool = False
    shared_inputs: tuple[str, ...] = ()
    buffer_updates: tuple[tuple[str, str], ...] = ()
    portable_xnnpack: bool = True
    external_weights: bool = False
    #: ``(symbol, min, max)`` per dynamic size of the method (module docstring).
    symbol_ranges: tuple[tuple[str, int, int], ...] = ()

    def to_compile_specs(self) -> list[CompileSpec]:
        return [
            CompileSpec("engine", self.engine.encode()),
            CompileSpec("kv_cache", self.kv_cache.encode()),
            CompileSpec("require_inplace", json.dumps(self.require_inplace).encode()),
            CompileSpec("shared_inputs", json.dumps(list(self.shared_inputs)).encode()),
            CompileSpec(
                "buffer_updates", json.dumps([list(p) for p in self.buffer_updates]).encode()
            ),
            CompileSpec("portable_xnnpack", json.dumps(self.portable_xnnpack).encode()),
            CompileSpec("external_weights", json.dumps(self.external_weights).encode()),
            CompileSpec(
                "symbol_ranges", json.dumps([list(r) for r in self.symbol_ranges]).encode()
            ),
        ]

    @staticmethod
    def from_compile_specs(specs: Sequence[CompileSpec]) -> CompileOptions:
        """Decodes specs written by ``to_compile_specs``. Checks the format only (known keys,
        values of the types above); raises ``ValueError`` naming the spec otherwise."""
        values: dict[str, Any] = {}
        for spec in specs:
            decode = _SPEC_DECODERS.get(spec.key)
            if decode is None:
                raise ValueError(f"TensorRTBackend: unknown compile spec {spec.key!r}")
            text = bytes(spec.value).decode()
            try:
                values[spec.key] = decode(text)
            except ValueError:  # json.JSONDecodeError too
                raise ValueError(
                    f"TensorRTBackend: compile spec {spec.key!r} has a malformed value {text!r}"
                ) from None
        return CompileOptions(**values)


def _flag(text: str) -> bool:
    value = json.loads(text)
    if not isinstance(value, bool):
        raise ValueError(text)
    return value


def _names(text: str) -> tuple[str, ...]:
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(text)
    return tuple(value)


def _name_pairs(text: str) -> tuple[tuple[str, str], ...]:
    value = json.loads(text)
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in value
    ):
        raise ValueError(text)
    return tuple((out, inp) for out, inp in value)


def _ranges(text: str) -> tuple[tuple[str, int, int], ...]:
    value = json.loads(text)
    if not isinstance(value, list) or not all(
        isinstance(r, list)
        and len(r) == 3
        and isinstance(r[0], str)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in r[1:])
        for r in value
    ):
        raise ValueError(text)
    return tuple((name, lo, hi) for name, lo, hi in value)


_SPEC_DECODERS: dict[str, Callable[[str], Any]] = {
    "engine": str,
    "kv_cache": str,
    "require_inplace": _flag,
    "shared_inputs": _names,
    "buffer_updates": _name_pairs,
    "portable_xnnpack": _flag,
    "external_weights": _flag,
    "symbol_ranges": _ranges,
}
