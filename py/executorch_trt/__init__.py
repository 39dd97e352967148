"""executorch-trt: a TensorRT delegate for ExecuTorch with caller-owned, in-place KV caches.

Public API (each name is imported when first used, so ``import executorch_trt.runtime`` does not
load the exporter):

* ``export(programs, *, engine="portable", kv_cache="inplace", **options)``
* ``transform_passes(**options)``, ``TensorRTPartitioner``, ``edge_compile_config()`` and
  ``backend_config(**options)``: ExecuTorch's composable path,
  ``to_edge_transform_and_lower(ep, transform_passes=..., partitioner=[...],
  compile_config=...).to_executorch(backend_config())``, which ``export`` is
* ``TensorRTBackend``: the ``BackendDetails`` whose ``preprocess`` writes the delegate blob
* ``inspect(program)``: per method, delegate calls, operators outside delegates and how each
  mutable buffer is updated (CLI: ``//tools:inspect_pte``)
* ``NotInPlaceWarning``, ``NotInPlaceError``: a buffer update ExecuTorch must copy back
* ``runtime``: ``load``, ``Program``, ``Method``, ``library_path``
* ``llm``: ``export_llm`` (ExecuTorch's LLM conventions, ``TextLLMRunner``)
* ``register()``: registers the ``"TensorRTBackend"`` backend with ExecuTorch's runtime in this
  process, for ``executorch.runtime.Runtime``, ``portable_lib`` and the LLM runner too. The
  import already does it when the delegate library is found (``runtime.registration``); call
  it to be explicit, or to get the reason (an exception) when it is not.

Quiet by default: importing, exporting and running print only what needs attention
(``quiet``); ``EXECUTORCH_TRT_VERBOSE=1`` shows everything.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from executorch_trt import quiet

quiet.drop_import_noise()  # torchao's import-time noise, whoever imports executorch.exir later

from executorch_trt.runtime.registration import (  # noqa: E402
    Registration,
    register,
    register_at_import,
)

if TYPE_CHECKING:
    from executorch_trt import llm, runtime
    from executorch_trt.backend.diagnostics import NotInPlaceError, NotInPlaceWarning
    from executorch_trt.backend.preprocess import TensorRTBackend
    from executorch_trt.inspection.inspect_program import inspect
    from executorch_trt.lowering.export import backend_config, export, transform_passes
    from executorch_trt.lowering.partitioner import TensorRTPartitioner
    from executorch_trt.passes.pipeline import edge_compile_config

#: Public name -> the module that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "export": "executorch_trt.lowering.export",
    "transform_passes": "executorch_trt.lowering.export",
    "backend_config": "executorch_trt.lowering.export",
    "edge_compile_config": "executorch_trt.passes.pipeline",
    "TensorRTPartitioner": "executorch_trt.lowering.partitioner",
    "TensorRTBackend": "executorch_trt.backend.preprocess",
    "NotInPlaceWarning": "executorch_trt.backend.diagnostics",
    "NotInPlaceError": "executorch_trt.backend.diagnostics",
    "inspect": "executorch_trt.inspection.inspect_program",
}
#: Subpackages reachable as attributes (``executorch_trt.runtime.load(...)``) without an import.
_SUBPACKAGES = ("runtime", "llm")

__all__ = [
    "export",
    "backend_config",
    "edge_compile_config",
    "transform_passes",
    "TensorRTPartitioner",
    "TensorRTBackend",
    "NotInPlaceWarning",
    "NotInPlaceError",
    "inspect",
    "runtime",
    "llm",
    "register",
    "Registration",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


register_at_import()  # stock ExecuTorch runtimes in this process load TensorRTBackend programs
