"""executorch-trt: a TensorRT delegate for ExecuTorch with caller-owned, in-place KV caches.

Public API:

* ``export(programs, *, engine="portable", kv_cache="inplace", **options)``
* ``transform_passes(**options)``, ``TensorRTPartitioner`` and ``backend_config(**options)``:
  ExecuTorch's composable path, ``to_edge_transform_and_lower(ep, transform_passes=...,
  partitioner=[...]).to_executorch(backend_config())``, which ``export`` is
* ``TensorRTPartitioner``, ``TensorRTBackend``
* ``inspect(program)``: per method, delegate calls, operators outside delegates and how each
  mutable buffer is updated (``program_report.py``; CLI: ``//tools:inspect_pte``)
* ``NotInPlaceWarning``, ``NotInPlaceError``: a buffer update ExecuTorch must copy back
* ``runtime``: ``load``, ``library_path``
* ``register()``: registers the ``"TensorRTBackend"`` backend with ExecuTorch's runtime in this
  process, for ``executorch.runtime.Runtime``, ``portable_lib`` and the LLM runner too. The
  import already does it when the delegate library is found (``registration.py``); call it to
  be explicit, or to get the reason (an exception) when it is not.

Quiet by default: importing, exporting and running print only what needs attention
(``quiet.py``); ``EXECUTORCH_TRT_VERBOSE=1`` shows everything.
"""

from executorch_trt import quiet

with quiet.imports():  # the first import of executorch.exir, and of torchao through it
    from executorch_trt import emitter_fixes
from executorch_trt import ops  # noqa: F401  (registers executorch_trt::kv_cache_update)
from executorch_trt import cross_attn_ops  # noqa: F401  (executorch::alias/update_cross_attn_cache .out)
from executorch_trt import attention_ops  # noqa: F401  (registers executorch_trt::gqa_attention)
from executorch_trt.backend import TensorRTBackend
from executorch_trt.export import backend_config, export, transform_passes
from executorch_trt.inplace_diagnostics import NotInPlaceError, NotInPlaceWarning
from executorch_trt.partitioner import TensorRTPartitioner
from executorch_trt.program_report import inspect
from executorch_trt import runtime  # noqa: F401  (executorch_trt.runtime)
from executorch_trt.registration import Registration, register, register_at_import

emitter_fixes.apply()  # named mutable buffers keep their own initial values (emitter_fixes.py)
register_at_import()  # stock ExecuTorch runtimes in this process load TensorRTBackend programs

__all__ = ["export", "backend_config", "transform_passes", "TensorRTPartitioner", "TensorRTBackend",
           "NotInPlaceWarning", "NotInPlaceError", "inspect", "runtime", "register", "Registration"]
