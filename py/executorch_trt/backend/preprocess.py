"""``TensorRTBackend``: ExecuTorch ``BackendDetails`` for the TensorRT delegate.

``preprocess`` turns one partition into a delegate blob (``docs/formats/delegate_blob.md``):

1. ``analyse_partition``: the partition passes canonicalise buffer writes
   (``passes.pipeline.canonicalise_partition``), ``binding_contract`` orders the bindings
   (delegate argument order, asserted) and ``decide_aliases`` decides the in-place aliases;
2. the selected engine (``engines.get_engine``) builds the payload and the named data it
   refers to (``engines.base.EnginePayload``);
3. ``write_blob`` serialises metadata and payload.

``preprocess_multimethod`` (how ExecuTorch's ``to_backend`` calls a backend: every partition of
every method at once) analyses every partition, then builds them side by side
(``partition_builds``), then writes each blob.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from executorch_trt.backend.analysis import analyse_partition
from executorch_trt.backend.diagnostics import report_view_copies
from executorch_trt.backend.partition_builds import BuildJob, build_all
from executorch_trt.engines import get_engine
from executorch_trt.format.blob import DelegateMetadata, write_blob
from executorch_trt.format.wire import BACKEND_ID
from executorch_trt.options import CompileOptions


class TensorRTBackend(BackendDetails):
    """Backend id ``"TensorRTBackend"`` (the C++ runtime registers the same name)."""

    @classmethod
    def copy_exported_program_for_preprocess(
        cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec]
    ) -> ExportedProgram:
        """The partition ``preprocess`` gets: its graph, signature and state dicts copied, its
        tensors (``state_dict``, ``constants``) shared with ``edge_program``.

        ExecuTorch's default deep-copies the tensors too, before preprocessing any method, so
        every method's copy of the weights is alive at once (two extra copies of a decoder's
        weights for prefill/decode). ``preprocess`` builds new graphs and new tensors and never
        writes a tensor of the partition, so the copies bought nothing; ExecuTorch's CUDA
        backend shares them the same way (its low-memory mode).
        """
        shared: dict[int, object] = {
            id(t): t
            for tensors in (edge_program.state_dict, edge_program.constants)
            for t in tensors.values()
            if isinstance(t, torch.Tensor)
        }
        return copy.deepcopy(edge_program, shared)

    @staticmethod
    def preprocess(
        edge_program: ExportedProgram, compile_specs: list[CompileSpec]
    ) -> PreprocessResult:
        """Compiles one partition into a delegate blob.

        Args:
            edge_program: the partition (edge dialect; ExecuTorch passes a private copy).
            compile_specs: ``options.CompileOptions.to_compile_specs()`` output (the
                partitioner's), decoded without re-validating the options.

        Returns ``PreprocessResult(processed_bytes=blob, data_store_output=...)``: the engine's
        named data (a portable engine's nested XNNPACK weights), which ExecuTorch stores once
        per program however many methods add it. Raises ``ValueError`` for malformed
        compile specs, an unknown engine, order mismatches or unsupported bindings,
        ``RuntimeError`` when the requested engine cannot be built here (``engine="tensorrt"``
        without TensorRT).
        """
        (result,) = _preprocess_all([("partition", edge_program, compile_specs)])
        return result

    @classmethod
    def preprocess_multimethod(
        cls,
        edge_programs: dict[str, list[ExportedProgram]],
        compile_specs: dict[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        """``preprocess`` of every partition of every method (ExecuTorch's ``to_backend`` calls
        this once per lowering): the same blobs, with the engine builds run side by side in
        worker processes when the engine allows it and the machine has several CPUs
        (``partition_builds.build_all``). Raises as ``preprocess`` does, for the first
        partition (in method and partition order) that fails."""
        partitions = [
            (f"method {method!r}, partition {index}", program, specs)
            for method, programs in edge_programs.items()
            for index, (program, specs) in enumerate(zip(programs, compile_specs[method]))
        ]
        results = iter(_preprocess_all(partitions))
        return {
            method: [next(results) for _ in programs] for method, programs in edge_programs.items()
        }


def _preprocess_all(
    partitions: Sequence[tuple[str, ExportedProgram, list[CompileSpec]]],
) -> list[PreprocessResult]:
    """Analyses each ``(where, partition, compile specs)`` (diagnostics in order), builds
    every engine payload (``build_all``), and writes each blob."""
    # The caller's grad mode must not change the blob (the engine re-traces the partition):
    # one program whether or not the lowering ran under torch.no_grad().
    with torch.no_grad():
        analysed = [_analyse(where, program, specs) for where, program, specs in partitions]
        payloads = build_all([job for job, _ in analysed])
    return [
        PreprocessResult(
            processed_bytes=write_blob(metadata, built.payload),
            data_store_output=built.named_data,
        )
        for (_, metadata), built in zip(analysed, payloads)
    ]


def _analyse(
    where: str, edge_program: ExportedProgram, compile_specs: list[CompileSpec]
) -> tuple[BuildJob, DelegateMetadata]:
    """The build job and the blob metadata of one partition; reports its view copies."""
    options = CompileOptions.from_compile_specs(compile_specs)
    engine = get_engine(options.engine)
    contract, decision = analyse_partition(edge_program, options)
    report_view_copies(decision.view_copies, dict(options.buffer_updates), options.require_inplace)
    metadata = DelegateMetadata(
        engine=engine.name,
        inputs=contract.inputs,
        outputs=contract.outputs,
        aliased_io=decision.aliases,
        symbols=contract.symbols,
    )
    job = BuildJob(engine, edge_program, tuple(decision.aliases), options, where)
    return job, metadata


# ExecuTorch finds the backend class by name; the partitioner and the C++ runtime use BACKEND_ID.
assert TensorRTBackend.__name__ == BACKEND_ID
