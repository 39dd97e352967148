"""TensorRT engine builder (serialized plan). Needs ``tensorrt`` and ``torch_tensorrt``."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from torch.export import ExportedProgram

from executorch_trt.engines.base import EnginePayload
from executorch_trt.format.blob import AliasedIO
from executorch_trt.options import CompileOptions


def tensorrt_available() -> bool:
    """True when both ``tensorrt`` and ``torch_tensorrt`` are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("tensorrt", "torch_tensorrt"))


def build(
    ep: ExportedProgram, aliases: Sequence[AliasedIO], options: CompileOptions | None = None
) -> EnginePayload:
    """Builds a serialized TensorRT plan for ``ep`` (an ``engines.base.EnginePayload``);
    ``aliases`` (``backend.aliases.decide_aliases``) says which outputs the plan must write into
    their input's storage (KV-cache update layer).
    ``options`` (``CompileOptions``) has nothing for this engine yet.

    Raises ``RuntimeError`` when TensorRT/torch_tensorrt is not available (this build has no
    TensorRT converter path yet either); use ``engine="portable"`` instead.
    """
    if not tensorrt_available():
        raise RuntimeError(
            "TensorRTBackend: engine='tensorrt' needs the 'tensorrt' and 'torch_tensorrt' Python "
            "packages (and a CUDA GPU), which are not available here; export with "
            "engine='portable' to run the partition on the CPU"
        )
    raise RuntimeError(
        "TensorRTBackend: engine='tensorrt' plan building is not implemented in this build; "
        "export with engine='portable'"
    )
