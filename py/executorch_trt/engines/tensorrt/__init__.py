"""The TensorRT engine: a serialized TensorRT plan run through ``nvinfer1`` on CUDA
(``docs/tensorrt_engine.md``). It owns its builder (``builder.py``; raises until a converter
path exists) and the operators it takes (``operators.py``)."""

from executorch_trt.engines.base import Engine
from executorch_trt.engines.tensorrt import builder, operators
from executorch_trt.format.wire import ENGINE_TENSORRT

ENGINE = Engine(name=ENGINE_TENSORRT, supported_ops=operators.SUPPORTED_OPS, build=builder.build)
