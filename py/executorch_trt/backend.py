"""``TensorRTBackend``: ExecuTorch ``BackendDetails`` for the TensorRT delegate.

``preprocess`` turns one partition into a delegate blob (``core/blob/FORMAT.md``):

1. ``KVCacheUpdatePass`` rewrites KV writes into ``executorch_trt.kv_cache_update``;
2. ``binding_contract`` orders the bindings (delegate argument order, asserted);
3. ``aliased_outputs`` decides the in-place aliases (``kv_cache`` option);
4. the engine builder (``portable`` / ``tensorrt``) produces the payload;
5. ``write_blob`` serialises metadata and payload.
"""

from __future__ import annotations

from typing import List

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from executorch_trt.blob import DelegateMetadata, write_blob
from executorch_trt.compile_options import BACKEND_ID, CompileOptions
from executorch_trt.contract import aliased_outputs, binding_contract
from executorch_trt.engines.portable import build_portable_engine
from executorch_trt.engines.tensorrt import build_tensorrt_engine
from executorch_trt.passes.kv_cache_update_pass import KVCacheUpdatePass

_ENGINE_BUILDERS = {"portable": build_portable_engine, "tensorrt": build_tensorrt_engine}


class TensorRTBackend(BackendDetails):
    """Backend id ``"TensorRTBackend"`` (the C++ runtime registers the same name)."""

    @staticmethod
    def preprocess(
        edge_program: ExportedProgram, compile_specs: List[CompileSpec]
    ) -> PreprocessResult:
        """Compiles one partition into a delegate blob.

        Args:
            edge_program: the partition (edge dialect; ExecuTorch passes a private copy).
            compile_specs: ``CompileOptions.to_compile_specs()`` output.

        Returns ``PreprocessResult(processed_bytes=blob)``. Raises ``ValueError`` for bad
        options, order mismatches or unsupported bindings, ``RuntimeError`` when the requested
        engine cannot be built here (``engine="tensorrt"`` without TensorRT).
        """
        options = CompileOptions.from_compile_specs(compile_specs)
        KVCacheUpdatePass()(edge_program.graph_module)
        contract = binding_contract(edge_program)
        aliases = aliased_outputs(contract, options.kv_cache, options.shared_inputs)
        payload = _ENGINE_BUILDERS[options.engine](edge_program, aliases)
        metadata = DelegateMetadata(
            engine=options.engine,
            inputs=contract.inputs,
            outputs=contract.outputs,
            aliased_io=tuple(aliases),
        )
        return PreprocessResult(processed_bytes=write_blob(metadata, payload))


# ExecuTorch finds the backend class by name; the partitioner and the C++ runtime use BACKEND_ID.
assert TensorRTBackend.__name__ == BACKEND_ID
