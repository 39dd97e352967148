"""The portable engine: the partition as a nested ExecuTorch program, run on the CPU by the
ExecuTorch runtime itself (the reference engine, ``docs/architecture.md``). It owns its builder
(``builder.py``) and the operators it takes (``operators.py``); its payload format is
``executorch_trt.format.portable_payload`` (``docs/formats/portable_payload.md``)."""

from executorch_trt.engines.base import Engine
from executorch_trt.engines.portable import builder, operators
from executorch_trt.format.wire import ENGINE_PORTABLE

# Its build is single-threaded Python on the CPU (re-traces, XNNPACK's passes): partitions
# build side by side in worker processes.
ENGINE = Engine(
    name=ENGINE_PORTABLE,
    supported_ops=operators.SUPPORTED_OPS,
    build=builder.build,
    builds_in_worker=True,
)
