// Copyright (c) executorch-trt authors.
//
// tensorrt_backend.h: the ExecuTorch BackendInterface of the delegate, registered under
// the id "TensorRTBackend" by a static initializer in tensorrt_backend.cpp.
//
// Data flows one way: blob -> BlobHeader -> DelegateMetadata -> Engine (CreateEngine) ->
// BindingPlan (all at init), then BindingPlan::Execute on every call.

#pragma once

#include <executorch/runtime/backend/interface.h>

namespace executorch_trt {

// The backend id the exporter writes into the program ("TensorRTBackend").
inline constexpr const char kTensorRTBackendId[] = "TensorRTBackend";

// Stateless: all per-delegate state lives in the handle init() returns. Thread-safe in
// the sense ExecuTorch requires (init/execute/destroy on distinct handles may run
// concurrently; one handle is never executed concurrently).
class TensorRTBackend final : public executorch::runtime::BackendInterface {
 public:
  // Always true: availability of a particular engine is checked per blob at init.
  bool is_available() const override;

  // Parses and validates the blob in `processed` (BlobHeader, DelegateMetadata), builds
  // the engine it names, and the BindingPlan. Takes ownership of `processed` (moved into
  // the handle, the engine payload is borrowed from it). `compile_specs` are unused.
  //
  // Returns the handle, or: Error::InvalidProgram (malformed or inconsistent blob),
  // Error::DelegateInvalidCompatibility (format version / feature skew),
  // Error::NotSupported (tensorrt engine in a build without TensorRT), engine load
  // errors, Error::MemoryAllocationFailed. On failure everything init allocated is freed.
  executorch::runtime::Result<executorch::runtime::DelegateHandle*> init(
      executorch::runtime::BackendInitContext& context,
      executorch::runtime::FreeableBuffer* processed,
      executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> compile_specs) const override;

  // Runs BindingPlan::Execute on `args` (inputs, then outputs, per the blob metadata).
  executorch::runtime::Error execute(
      executorch::runtime::BackendExecutionContext& context,
      executorch::runtime::DelegateHandle* handle,
      executorch::runtime::Span<executorch::runtime::EValue*> args) const override;

  // Frees the engine, the plan and the blob. Null handles are ignored.
  void destroy(executorch::runtime::DelegateHandle* handle) const override;
};

}  // namespace executorch_trt
