"""executorch-trt: a TensorRT delegate for ExecuTorch with caller-owned, in-place KV caches.

Public API:

* ``export(programs, *, engine="portable", kv_cache="inplace", **options)``
* ``backend_config(**options)`` for ``to_edge_transform_and_lower(...).to_executorch(...)``
* ``TensorRTPartitioner``, ``TensorRTBackend``
* ``inspect(program)``: per method, delegate calls, operators outside delegates and how each
  mutable buffer is updated (``program_report.py``; CLI: ``//tools:inspect_pte``)
* ``NotInPlaceWarning``, ``NotInPlaceError``: a buffer update ExecuTorch must copy back
* ``runtime`` (imported lazily): ``load``, ``library_path``
"""

from executorch_trt import emitter_fixes
from executorch_trt import ops  # noqa: F401  (registers executorch_trt::kv_cache_update)
from executorch_trt import cross_attn_ops  # noqa: F401  (executorch::alias/update_cross_attn_cache .out)
from executorch_trt import attention_ops  # noqa: F401  (registers executorch_trt::gqa_attention)
from executorch_trt.backend import TensorRTBackend
from executorch_trt.export import backend_config, export
from executorch_trt.inplace_diagnostics import NotInPlaceError, NotInPlaceWarning
from executorch_trt.partitioner import TensorRTPartitioner
from executorch_trt.program_report import inspect

emitter_fixes.apply()  # named mutable buffers keep their own initial values (emitter_fixes.py)

__all__ = ["export", "backend_config", "TensorRTPartitioner", "TensorRTBackend",
           "NotInPlaceWarning", "NotInPlaceError", "inspect", "runtime"]


def __getattr__(name):
    if name == "runtime":
        import importlib

        return importlib.import_module("executorch_trt.runtime")
    raise AttributeError(f"module 'executorch_trt' has no attribute {name!r}")
