"""The composable path: ``export``, ``TensorRTPartitioner``, ``transform_passes`` and
``backend_config``, with what only a whole lowering sees (buffers shared between methods, the
in-place memory planning) and the fixes ExecuTorch 1.5.1's emitter needs.

Importing this package prepares ExecuTorch for a lowering with the delegate: the delegate's
operators are registered with torch (``executorch_trt.ops``), ``TensorRTBackend`` is defined (the
lowering finds it by name) and the emitter fixes are applied (``emitter_fixes``).
"""

from executorch_trt import ops  # noqa: F401  (registers the delegate's operators)
from executorch_trt.backend import preprocess  # noqa: F401  (defines TensorRTBackend)
from executorch_trt.lowering import emitter_fixes

emitter_fixes.apply()  # named mutable buffers keep their own initial values (emitter_fixes.py)
