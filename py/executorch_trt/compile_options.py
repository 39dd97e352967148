"""Delegate compile options and their ``CompileSpec`` encoding.

The partitioner writes these into the ``DelegationSpec``; ``TensorRTBackend.preprocess`` reads
them back. Keys are UTF-8 strings, values UTF-8 bytes.

* ``engine``: ``"portable"`` (nested ExecuTorch program run on CPU) or ``"tensorrt"``
  (serialized TensorRT plan; needs TensorRT at export time).
* ``kv_cache``: ``"inplace"`` (a KV write becomes ``executorch_trt::kv_cache_update`` and its
  output is recorded as an alias of the cache input, ownership ``caller``) or ``"copy_back"``
  (no alias; the new cache is an ordinary output that ExecuTorch copies back).
* ``shared_inputs``: set by the partitioner per partition: names of partition inputs that are
  also read outside the partition. The engine must not update those in place (another reader
  would see the new value), so they are never aliased.
* ``buffer_updates``: set by the partitioner per partition: ``(output, input)`` name pairs where
  partition output ``output`` is the new value of the mutable buffer that partition input
  ``input`` carries (a ``BUFFER_MUTATION`` of the method). Only these outputs may be aliased:
  an output that is *not* a buffer's new value (e.g. a functional ``index_copy`` returned to
  the user) must leave its input untouched, as eager PyTorch does.
* ``require_inplace``: ``preprocess`` raises ``NotInPlaceError`` instead of warning when an
  in-place update still copies part of its buffer inside the engine (a write into a view of
  the cache; ``contract.AliasDecision.view_copies``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Sequence, Tuple

from executorch.exir.backend.compile_spec_schema import CompileSpec

#: The backend id: ``TensorRTBackend.__name__`` in Python and the name the C++ runtime
#: registers (``executorch::runtime::register_backend``).
BACKEND_ID = "TensorRTBackend"
ENGINES = ("portable", "tensorrt")
KV_CACHE_MODES = ("inplace", "copy_back")


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Validated delegate options. Raises ``TypeError`` when ``engine``/``kv_cache`` is not a
    ``str`` and ``ValueError`` on an unknown value."""

    engine: str = "portable"
    kv_cache: str = "inplace"
    shared_inputs: Tuple[str, ...] = ()
    buffer_updates: Tuple[Tuple[str, str], ...] = ()
    require_inplace: bool = False

    def __post_init__(self) -> None:
        for name in ("engine", "kv_cache"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(
                    f"executorch_trt: option {name} must be a str, got {type(value).__name__} "
                    f"{value!r}"
                )
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; expected one of {ENGINES}")
        if self.kv_cache not in KV_CACHE_MODES:
            raise ValueError(
                f"unknown kv_cache mode {self.kv_cache!r}; expected one of {KV_CACHE_MODES}"
            )

    def to_compile_specs(self) -> List[CompileSpec]:
        return [
            CompileSpec("engine", self.engine.encode()),
            CompileSpec("kv_cache", self.kv_cache.encode()),
            CompileSpec("shared_inputs", json.dumps(list(self.shared_inputs)).encode()),
            CompileSpec("buffer_updates",
                        json.dumps([list(p) for p in self.buffer_updates]).encode()),
            CompileSpec("require_inplace", json.dumps(self.require_inplace).encode()),
        ]

    @staticmethod
    def from_compile_specs(specs: Sequence[CompileSpec]) -> "CompileOptions":
        """Decodes specs written by ``to_compile_specs``; unknown keys raise ``ValueError``."""
        values = {}
        known = {f.name for f in dataclasses.fields(CompileOptions)}
        for spec in specs:
            if spec.key not in known:
                raise ValueError(f"TensorRTBackend: unknown compile spec {spec.key!r}")
            values[spec.key] = bytes(spec.value).decode()
        if "shared_inputs" in values:
            values["shared_inputs"] = tuple(json.loads(values["shared_inputs"]))
        if "require_inplace" in values:
            values["require_inplace"] = bool(json.loads(values["require_inplace"]))
        if "buffer_updates" in values:
            values["buffer_updates"] = tuple(
                (str(out), str(inp)) for out, inp in json.loads(values["buffer_updates"]))
        return CompileOptions(**values)

    @property
    def buffer_update_of(self) -> Dict[str, str]:
        """``{output name: input name}`` from ``buffer_updates``."""
        return dict(self.buffer_updates)
