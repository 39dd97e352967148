"""LLM programs in ExecuTorch's conventions: ``export_llm`` turns a ``transformers`` causal LM
(an instance or a local checkpoint directory) into a ``.pte`` that ExecuTorch's
``TextLLMRunner`` runs, with the delegate updating the KV cache in place.

* ``export_llm(model_or_dir, max_seq_len, *, output=None, data=None, prefill_decode=False,
  engine="portable", dtype=torch.float32, max_context_len=None, progress=None, **options)``
* ``SUPPORTED_ARCHITECTURES``: ``config.model_type`` -> causal-LM class
* ``CheckpointError``, ``UnsupportedArchitectureError`` (both ``ValueError``)
* CLI: ``./bazelw run //:export_llm -- --model-dir DIR --max-seq-len N --output model.pte``
"""

from executorch_trt.llm.architectures import SUPPORTED_ARCHITECTURES, UnsupportedArchitectureError
from executorch_trt.llm.checkpoint import CheckpointError
from executorch_trt.llm.export_llm import export_llm

__all__ = [
    "export_llm",
    "SUPPORTED_ARCHITECTURES",
    "CheckpointError",
    "UnsupportedArchitectureError",
]
