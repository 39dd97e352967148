"""``executorch_trt.export``: ExportedProgram(s) -> ``ExecutorchProgramManager``.

It is exactly ExecuTorch's composable path with this delegate's pieces::

    partitioner = TensorRTPartitioner(engine="portable")
    edge = to_edge_transform_and_lower(
        programs, partitioner=[partitioner],
        transform_passes=executorch_trt.transform_passes(engine="portable"),
        compile_config=executorch_trt.edge_compile_config())
    et = edge.to_executorch(executorch_trt.backend_config())

* ``TensorRTPartitioner`` prepares each ATen program before decomposition and refuses what
  the delegate cannot run right (``transform_for_pre_decomposition``), then partitions.
* ``transform_passes()`` run on the edge programs before partitioning (``TRANSFORM_PASSES``).
  Without them the lowering refuses a program that needs them (a dynamic size read inside
  and outside the delegate, a buffer assigned another buffer) and serialises zero-valued
  buffers it could leave out.
* ``edge_compile_config()`` leaves out the edge dialect verifier, as ExecuTorch's own LLM
  export does; it changes no byte of the program, only the export time.
* ``backend_config()`` finalises: in-place memory planning, buffer initialisation and the
  copies sibling conds need (``_backend_config``).

Finalising a single method *without* ``backend_config()`` is still correct (ExecuTorch's
write-back copies the cache back), but slower and without initialised buffers; several methods
without it do not share their buffers (``decode`` would not see ``prefill``'s cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from executorch.exir import (
    ExecutorchBackendConfig,
    ExecutorchProgramManager,
    to_edge_transform_and_lower,
)
from executorch.exir.pass_manager import PassType
from torch.export import ExportedProgram

from executorch_trt import quiet
from executorch_trt.engines import get_engine
from executorch_trt.lowering.memory_planning import InplaceMemoryPlanningPass
from executorch_trt.lowering.partitioner import TensorRTPartitioner
from executorch_trt.options import ExportOptions
from executorch_trt.passes.pipeline import (
    edge_compile_config,
    edge_transform_passes,
    finalise_passes,
)


def _check_programs(programs: Any) -> None:
    """Raises ``TypeError``/``ValueError`` unless ``programs`` is an ``ExportedProgram`` or a
    non-empty ``{method name: ExportedProgram}``."""
    expected = (
        "expected a torch.export.ExportedProgram or a dict of method name -> ExportedProgram "
        "(e.g. {'prefill': ep_prefill, 'decode': ep_decode})"
    )
    if isinstance(programs, ExportedProgram):
        return
    if isinstance(programs, dict):
        if not programs:
            raise ValueError(
                "executorch_trt.export: got an empty dict, so there are no methods to export; "
                + expected
            )
        for name, ep in programs.items():
            if not isinstance(name, str) or not name:
                raise TypeError(
                    f"executorch_trt.export: method names must be non-empty str, got "
                    f"{type(name).__name__} {name!r}; " + expected
                )
            if not isinstance(ep, ExportedProgram):
                raise TypeError(
                    f"executorch_trt.export: method {name!r} is a {_type_name(ep)}, not an "
                    f"ExportedProgram; {expected}{_export_hint(ep)}"
                )
        return
    raise TypeError(
        f"executorch_trt.export: got {_type_name(programs)}; {expected}{_export_hint(programs)}"
    )


def _type_name(value: Any) -> str:
    if value is None:
        return "None"
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _export_hint(value: Any) -> str:
    if isinstance(value, torch.nn.Module):
        return (
            ". Export the module first: ep = torch.export.export(module, example_inputs), "
            "then executorch_trt.export(ep)"
        )
    if isinstance(value, (list, tuple)):
        return ". For several methods pass a dict {method_name: ExportedProgram}, not a list"
    return ". Use torch.export.export(module, example_inputs) to get an ExportedProgram"


def transform_passes(**options: Any) -> list[PassType]:
    """The ``transform_passes`` for ``to_edge_transform_and_lower`` of programs lowered with
    ``TensorRTPartitioner`` (give both the same ``engine``). Accepts the ``ExportOptions``
    names; unknown names raise ``TypeError``, bad values ``ValueError``. In order:

    * ``SizeCopiesPass``: a dynamic size read inside and outside the delegate gets a copy for
      the delegate's readers, which computes it itself (``passes/size_copies.py``);
    * ``BufferToBufferWritesPass``: a buffer assigned another buffer as it is keeps the write
      ExecuTorch 1.5.1 would drop (``passes/buffer_to_buffer_writes.py``);
    * ``MarkZeroBuffersPass``: all-zero mutable buffers are not serialised
      (``passes/initialize_mutable_buffers.py``)."""
    return _transform_passes(ExportOptions.from_kwargs(**options))


def _transform_passes(opts: ExportOptions) -> list[PassType]:
    return edge_transform_passes(get_engine(opts.engine).supported_ops)


def backend_config(**options: Any) -> ExecutorchBackendConfig:
    """The ``ExecutorchBackendConfig`` for ``to_executorch`` of a program lowered with
    ``TensorRTPartitioner``. Accepts the ``ExportOptions`` names; unknown names raise
    ``TypeError``, bad values ``ValueError``. One config can finalise several programs in
    turn. ``to_executorch`` warns (``NotInPlaceWarning``) for every buffer update it must copy
    back, or raises ``NotInPlaceError`` with ``require_inplace=True``."""
    return _backend_config(ExportOptions.from_kwargs(**options))


def _backend_config(
    opts: ExportOptions, method_names: Sequence[str] | None = None
) -> ExecutorchBackendConfig:
    """``backend_config`` for options already validated; ``method_names`` in planning order
    (for messages)."""
    planner = InplaceMemoryPlanningPass(
        alloc_mutable_buffers=opts.alloc_mutable_buffers,
        share_mutable_buffers=opts.shares_mutable_buffers,
        inplace=opts.inplace,
        require_inplace=opts.require_inplace,
        method_names=method_names,
        share_by_name=opts.share_mutable_buffers is True,
    )
    return ExecutorchBackendConfig(
        passes=finalise_passes(opts.initializes_mutable_buffers),
        memory_planning_pass=planner,
        emit_mutable_buffer_names=opts.emit_mutable_buffer_names,
    )


def export(
    programs: ExportedProgram | dict[str, ExportedProgram],
    *,
    engine: str = "portable",
    kv_cache: str = "inplace",
    constant_methods: dict[str, Any] | None = None,
    **options: Any,
) -> ExecutorchProgramManager:
    """Lowers ``programs`` (one ``ExportedProgram``, emitted as method ``"forward"``, or
    ``{method_name: ExportedProgram}``, e.g. ``{"prefill": ..., "decode": ...}``) through
    ExecuTorch's composable path with ``transform_passes``, ``TensorRTPartitioner``,
    ``edge_compile_config`` and ``backend_config`` (module docstring): the result is the
    program that path gives.

    Args:
        engine: ``"portable"`` (nested ExecuTorch program on CPU) or ``"tensorrt"``.
        kv_cache: ``"inplace"`` (KV writes update the caller's cache in place) or
            ``"copy_back"`` (ExecuTorch copies the new cache back).
        constant_methods: ``{method name: value}`` emitted as methods that return the value
            (ExecuTorch's ``to_edge_transform_and_lower(..., constant_methods=...)``, e.g. the
            LLM runner's ``get_max_seq_len``: int, float, bool, str, a tensor or a list of them).
        **options: the other ``ExportOptions`` (``share_mutable_buffers``,
            ``alloc_mutable_buffers``, ``emit_mutable_buffer_names``, ``init_mutable_buffers``,
            ``inplace``, ``require_inplace``, ``portable_xnnpack``, ``external_weights``).

    Dynamic shapes: a method exported with ``dynamic_shapes`` whose dynamic dimensions are
    ``torch.export.Dim``s with a finite max runs for any size in the Dim's range on one loaded
    program (blob format version 2; ``dynamic_shapes``): e.g. ``prefill`` with
    ``Dim("T", min=1, max=max_seq_len)`` takes prompts of every length.

    Cross-attention caches a ``torch.cond`` updates with ``executorch::update_cross_attn_cache``
    become mutable buffers updated in place (``passes.cross_attn_cache``; this records them in
    the given programs' graph signatures). With the portable engine, SDPA results are given a
    fixed layout in the given programs' graphs (``passes.sdpa_layout``), so that attention
    over several query rows (prefill) also runs on the engine's attention kernel.

    Returns the ``ExecutorchProgramManager`` (``.buffer`` is the ``.pte``). Raises ``TypeError``
    when ``programs`` is neither an ``ExportedProgram`` nor a dict of them (e.g. an
    ``nn.Module``: call ``torch.export.export`` first), for unknown options and for option
    values of the wrong type (booleans must be ``True``/``False``); ``ValueError`` for an empty
    dict and bad option values; ``RuntimeError`` when the engine cannot be built here
    (``engine="tensorrt"`` without TensorRT); ``ValueError``, naming the method and the input
    or buffer, for a dynamic shape the delegate cannot bind (``dynamic_shapes``: a symbolic-int
    input, an expression of sizes, no upper bound), a mutated user input (register the
    cache as a buffer: ``graph_mutations``) and a buffer that two methods would share without
    being one model's state (``buffer_sharing``); ``NotInPlaceError`` (a ``ValueError``) with
    ``require_inplace=True`` when a buffer update would be copied back. Without
    ``require_inplace`` such an update is exported (ExecuTorch's write-back keeps it correct)
    with a ``NotInPlaceWarning`` naming the method, the buffer, the bytes per call and why.
    """
    _check_programs(programs)
    opts = ExportOptions.from_kwargs(**dict(options, engine=engine, kv_cache=kv_cache))
    method_names = list(programs) if isinstance(programs, dict) else ["forward"]
    partitioner = TensorRTPartitioner.from_options(opts, method_names=method_names)
    with quiet.lowering():  # torch's LeafSpec warnings from ExecuTorch's own deep copies
        edge = to_edge_transform_and_lower(
            programs,
            transform_passes=_transform_passes(opts),
            partitioner=[partitioner],
            constant_methods=constant_methods,
            compile_config=edge_compile_config(),
        )
    program: ExecutorchProgramManager = edge.to_executorch(_backend_config(opts, method_names))
    return program
