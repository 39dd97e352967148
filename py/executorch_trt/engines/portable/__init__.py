"""The portable engine: the partition as a nested ExecuTorch program, run on the CPU by the
ExecuTorch runtime itself (the reference engine, DESIGN.md). It owns its builder
(``builder.py``), its payload format (``payload.py``, ``core/engine/PORTABLE_FORMAT.md``) and
the operators it takes (``operators.py``)."""

from executorch_trt.engines.base import Engine
from executorch_trt.engines.portable import builder, operators
from executorch_trt.format.wire import ENGINE_PORTABLE

ENGINE = Engine(name=ENGINE_PORTABLE, supported_ops=operators.SUPPORTED_OPS, build=builder.build)
