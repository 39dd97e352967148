"""The operators the TensorRT engine would implement: what Torch-TensorRT's dynamo converters
cover of a decoder block (every group of ``op_groups``), with KV writes through TensorRT's
KV-cache update layer (DESIGN.md "The TensorRT engine, on paper").

No converter path is built yet (``builder.build`` raises), so this is the list the engine
claims for partitioning; replace it with the converter registry's when the builder exists.
"""

from __future__ import annotations

from typing import FrozenSet

from executorch_trt.engines import op_groups

#: Schema names (``namespace::name``) the TensorRT engine takes.
SUPPORTED_OPS: FrozenSet[str] = op_groups.DECODER
