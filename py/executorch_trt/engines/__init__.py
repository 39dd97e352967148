"""Engine builders. Each turns a partition program into an engine payload:

* ``portable.build_portable_engine``: a nested ExecuTorch program (``PORTABLE_FORMAT.md``);
* ``tensorrt.build_tensorrt_engine``: a serialized TensorRT plan (needs TensorRT).
"""
