"""``Engine``: what the exporter needs from an engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from executorch.exir._serialize._named_data_store import NamedDataStoreOutput
from torch.export import ExportedProgram

from executorch_trt.format.blob import AliasedIO
from executorch_trt.options import CompileOptions


@dataclasses.dataclass(frozen=True)
class EnginePayload:
    """What an engine builds for one partition.

    * ``payload``: the blob's payload section (the engine's own format).
    * ``named_data``: data the payload refers to by key, for ExecuTorch's named data store
      (``PreprocessResult.data_store_output``): ExecuTorch stores each distinct key once per
      program, whichever methods and partitions add it, and the runtime hands the delegate
      the program's ``NamedDataMap`` at init. ``None`` when the payload is self-contained.
    """

    payload: bytes
    named_data: NamedDataStoreOutput | None = None


@dataclasses.dataclass(frozen=True)
class Engine:
    """One engine of the delegate, export side.

    * ``name``: its ``wire.ENGINES`` name, written into the blob metadata (``"engine"``).
    * ``supported_ops``: the schema names (``"aten::mm"``) it implements; the partitioner takes
      only these (``operator_support.DelegateOperatorSupport`` adds the rules every engine
      shares).
    * ``build(partition, aliases, options)``: the ``EnginePayload`` for one partition program
      (edge dialect, KV writes rewritten, no mutation outputs), its alias decision
      (``backend.aliases.decide_aliases``) and its ``CompileOptions`` (e.g.
      ``portable_xnnpack``). Raises ``RuntimeError`` when the engine cannot be built
      here, ``ValueError`` when the partition does not fit it.
    * ``builds_in_worker``: ``build`` may run in a forked worker process, next to other
      partitions' builds (``backend.partition_builds``). Only for an engine whose build uses
      no state a fork does not carry (a CUDA context, other threads).
    """

    name: str
    supported_ops: frozenset[str] = dataclasses.field(repr=False)
    build: Callable[
        [ExportedProgram, Sequence[AliasedIO], CompileOptions | None], EnginePayload
    ] = dataclasses.field(repr=False)
    builds_in_worker: bool = False
