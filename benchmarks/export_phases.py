"""Where an export's time goes: wall time per phase of `executorch_trt.export`, nested.

`PhaseTimer.instrument()` wraps the functions each phase runs (ExecuTorch's and the delegate's)
for the duration of a `with` block, so the export itself is run unchanged. A phase is a path of
names (the phases it runs inside, outermost first): the XNNPACK preprocess of the nested program
is `to_edge_transform_and_lower/to_backend/preprocess/engine builds/nested lowering/to_backend/
xnnpack preprocess`. Each call adds its wall time to its path; `rows()` gives every path with its
time, its calls and the time spent in none of its instrumented children ("self").

Partitions that build in worker processes (`backend.partition_builds`) are timed as a whole
(`engine builds`); run with `EXECUTORCH_TRT_BUILD_WORKERS=1` to see the phases inside them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

_PROGRAM = "executorch.exir.program._program"
_PREPROCESS = "executorch_trt.backend.preprocess"
_BUILDER = "executorch_trt.engines.portable.builder"
_EXPORT = "executorch_trt.lowering.export"
_VERIFIER = "executorch.exir.verification.verifier"
_XNNPACK = "executorch.backends.xnnpack.xnnpack_preprocess"

#: (module, attribute path, phase name): what `instrument` wraps, where callers look it up.
#: A function imported by name into another module is wrapped there (e.g. `analyse_partition`
#: in `backend.preprocess`).
PATCH_POINTS: tuple[tuple[str, str, str], ...] = (
    (_EXPORT, "to_edge_transform_and_lower", "to_edge_transform_and_lower"),
    (_PROGRAM, "_gen_edge_manager_for_partitioners", "to_edge (decompositions)"),
    ("torch.export.exported_program", "ExportedProgram.run_decompositions", "run_decompositions"),
    (_PROGRAM, "_generate_edge_program", "edge dialect"),
    (_PROGRAM, "EdgeProgramManager.transform", "transform passes"),
    (_VERIFIER, "_check_tensor_args_matching_op_allowed_dtype", "edge dtype check"),
    ("executorch.exir.lowered_backend_module", "legalize_graph", "legalize graph"),
    (_PROGRAM, "EdgeProgramManager.to_backend", "to_backend"),
    (_PROGRAM, "EdgeProgramManager.to_executorch", "to_executorch"),
    ("executorch_trt.lowering.partitioner", "TensorRTPartitioner.partition", "partition"),
    ("executorch.exir.backend.backend_api", "_create_partitions", "create partitions"),
    (_PREPROCESS, "_preprocess_all", "preprocess"),
    (_PREPROCESS, "analyse_partition", "analysis"),
    (_PREPROCESS, "report_view_copies", "diagnostics"),
    (_PREPROCESS, "build_all", "engine builds"),
    ("executorch_trt.engines.portable", "ENGINE.build", "nested lowering"),
    (_BUILDER, "_NestedXnnpackPartitioner.partition", "xnnpack partition"),
    (_XNNPACK, "XnnpackBackend.preprocess", "xnnpack preprocess"),
    (_BUILDER, "split_nested_program", "nested serialization"),
    (_PREPROCESS, "write_blob", "blob"),
    ("executorch.exir.passes", "MemoryPlanningPass.run", "memory planning"),
    (_PROGRAM, "emit_program", "emit"),
    (_PROGRAM, "serialize_for_executorch", "serialize"),
    (_PROGRAM, "collect_named_data_store_from_exported_program", "named data"),
)

#: Attributes that are staticmethods on their class (wrapped as staticmethods again).
_STATIC = frozenset({"XnnpackBackend.preprocess"})


@dataclasses.dataclass
class PhaseRow:
    """One phase: its path, wall seconds over all its calls, calls, seconds in none of its
    instrumented children, and the process's CPU seconds in it (steadier than wall time when
    other work shares the machine)."""

    path: tuple[str, ...]
    seconds: float
    calls: int
    self_seconds: float
    cpu_seconds: float


def _set(owner: Any, attr: str, value: Any) -> None:
    if dataclasses.is_dataclass(owner) and not isinstance(owner, type):
        object.__setattr__(owner, attr, value)  # also a field of a frozen one (an engine's)
    else:
        setattr(owner, attr, value)


class PhaseTimer:
    """Accumulates wall time per phase path (module docstring)."""

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._seconds: dict[tuple[str, ...], float] = {}
        self._calls: dict[tuple[str, ...], int] = {}
        self._cpu: dict[tuple[str, ...], float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as phase `name` under the current one."""
        self._stack.append(name)
        path = tuple(self._stack)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._seconds[path] = self._seconds.get(path, 0.0) + time.perf_counter() - start
            self._cpu[path] = self._cpu.get(path, 0.0) + time.process_time() - cpu
            self._calls[path] = self._calls.get(path, 0) + 1
            self._stack.pop()

    def _wrap(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return fn(*args, **kwargs)

        return timed

    @contextlib.contextmanager
    def instrument(self) -> Iterator[None]:
        """Wraps every `PATCH_POINTS` function for the block; restores them after."""
        restore: list[tuple[Any, str, Any]] = []
        try:
            for module_name, attr_path, name in PATCH_POINTS:
                owner: Any = importlib.import_module(module_name)
                *parents, attr = attr_path.split(".")
                for parent in parents:
                    owner = getattr(owner, parent)
                original = vars(owner).get(attr, getattr(owner, attr))
                fn = original.__func__ if isinstance(original, staticmethod) else original
                timed = self._wrap(fn, name)
                _set(owner, attr, staticmethod(timed) if attr_path in _STATIC else timed)
                restore.append((owner, attr, original))
            yield
        finally:
            for owner, attr, original in reversed(restore):
                _set(owner, attr, original)

    def rows(self) -> list[PhaseRow]:
        """Every phase, parents before children, in first-seen order."""
        rows = []
        for path, seconds in self._seconds.items():
            children = sum(
                s for p, s in self._seconds.items() if len(p) == len(path) + 1 and p[:-1] == path
            )
            rows.append(
                PhaseRow(path, seconds, self._calls[path], seconds - children, self._cpu[path])
            )
        order = {p: i for i, p in enumerate(self._seconds)}
        # Children finish (and are recorded) before their parents: sort by path prefixes.
        return sorted(
            rows, key=lambda r: [order.get(r.path[: i + 1], 0) for i in range(len(r.path))]
        )
