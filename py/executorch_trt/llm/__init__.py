"""LLM programs in ExecuTorch's conventions, and conversations with them.

Exporting (imports the exporter on first use):

* ``export_llm(model_or_dir, max_seq_len, *, output=None, data=None, prefill_decode=False,
  engine="portable", dtype=torch.float32, max_context_len=None, progress=None, **options)``:
  a ``transformers`` causal LM (an instance or a local checkpoint directory) as a ``.pte`` that
  ExecuTorch's ``TextLLMRunner`` runs, with the delegate updating the KV cache in place
* ``quantize(model, scheme="8da4w", group_size=32)``: the linears quantized in place as
  ExecuTorch's LLM recipe does (``export_llm(..., quantize="8da4w")`` applies it on a copy)
* ``SUPPORTED_ARCHITECTURES``: ``config.model_type`` -> causal-LM class
* ``CheckpointError``, ``UnsupportedArchitectureError`` (both ``ValueError``)
* CLI: ``./bazelw run //:export_llm -- --model-dir DIR --max-seq-len N --output model.pte``

Running (the runtime only, never the exporter):

* ``load(path, data=None, *, max_context_len=None) -> LLMProgram``; ``LLMProgram.new_session()``,
  ``load_session(path)``, ``prefix_cache(max_bytes)``
* ``Session``: ``prefill``, ``decode``, ``generate``, ``rewind``, ``fork``, ``save``, ``position``,
  ``tokens``, ``reused_tokens``
* CLI: ``./bazelw run //:chat -- --model model.pte --tokenizer tokenizer.json``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from executorch_trt.llm.architectures import SUPPORTED_ARCHITECTURES, UnsupportedArchitectureError
from executorch_trt.llm.prefix_cache import PrefixCache
from executorch_trt.llm.program import LLMProgram, load
from executorch_trt.llm.sampling import SamplingConfig
from executorch_trt.llm.session import Session

if TYPE_CHECKING:
    from executorch_trt.llm.checkpoint import CheckpointError
    from executorch_trt.llm.export_llm import export_llm
    from executorch_trt.llm.quantization import quantize

_LAZY = {
    "export_llm": "executorch_trt.llm.export_llm",
    "CheckpointError": "executorch_trt.llm.checkpoint",
    "quantize": "executorch_trt.llm.quantization",
}

__all__ = [
    "export_llm",
    "quantize",
    "SUPPORTED_ARCHITECTURES",
    "CheckpointError",
    "UnsupportedArchitectureError",
    "load",
    "LLMProgram",
    "Session",
    "PrefixCache",
    "SamplingConfig",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
