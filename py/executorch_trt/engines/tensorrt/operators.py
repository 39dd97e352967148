"""The operators the TensorRT engine would implement: what Torch-TensorRT's dynamo converters
cover of a decoder block (every group of ``op_groups``), with KV writes through TensorRT's
KV-cache update layer (``docs/tensorrt_engine.md``, "The engine on paper").

No converter path is built yet (``builder.build`` raises), so this is the list the engine
claims for partitioning; replace it with the converter registry's when the builder exists.

``torch.cond`` and the cross-attention cache ops are not claimed: TensorRT would need an
``IIfConditional`` whose output is bound to the address of the cache *input*, and TensorRT does
not define writing into an input binding. With this engine the ``cond`` stays above the delegate
and ExecuTorch runs it on the CPU, still in place (``passes/cross_attn_cache.py``).
"""

from __future__ import annotations

from executorch_trt.engines import op_groups

#: Schema names (``namespace::name``) the TensorRT engine takes.
SUPPORTED_OPS: frozenset[str] = op_groups.DECODER
