"""The engines, one package each, behind one ``Engine`` interface (``base.py``):

* ``portable``: a nested ExecuTorch program run on the CPU (``docs/formats/portable_payload.md``);
* ``tensorrt``: a serialized TensorRT plan (needs TensorRT).

``get_engine(name)`` is how the partitioner and ``preprocess`` reach the selected one.
"""

from __future__ import annotations

from executorch_trt.engines import portable, tensorrt
from executorch_trt.engines.base import Engine
from executorch_trt.format.wire import ENGINES

_BY_NAME = {e.name: e for e in (portable.ENGINE, tensorrt.ENGINE)}
assert tuple(_BY_NAME) == ENGINES, "every wire.ENGINES name has one engine package"


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (a ``wire.ENGINES`` name); ``ValueError`` for any other."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown engine {name!r}; expected one of {ENGINES}") from None
