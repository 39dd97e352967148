// Copyright (c) executorch-trt authors.

#include "core/backend/tensorrt_backend.h"

#include <cinttypes>
#include <memory>
#include <new>
#include <utility>

#include <executorch/runtime/platform/log.h>

#include "core/binding/binding_plan.h"
#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "core/common/runtime_types.h"
#include "core/engine/engine.h"
#include "core/engine/engine_factory.h"

namespace executorch_trt {
namespace {

using executorch::runtime::DelegateHandle;
using executorch::runtime::FreeableBuffer;

// Everything one initialized delegate owns. Members are destroyed in reverse order:
// plan, engine (which borrows the blob), then the blob.
struct DelegateState {
  explicit DelegateState(FreeableBuffer&& b) : blob(std::move(b)) {}
  FreeableBuffer blob;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<BindingPlan> plan;
};

}  // namespace

bool TensorRTBackend::is_available() const { return true; }

Result<DelegateHandle*> TensorRTBackend::init(
    executorch::runtime::BackendInitContext& context, FreeableBuffer* processed,
    executorch::runtime::ArrayRef<executorch::runtime::CompileSpec> /*compile_specs*/) const {
  if (processed == nullptr) {
    ET_LOG(Error, "executorch_trt: init called without a delegate blob.");
    return Error::InvalidArgument;
  }
  std::unique_ptr<DelegateState> state(new (std::nothrow) DelegateState(std::move(*processed)));
  if (state == nullptr) {
    return Error::MemoryAllocationFailed;
  }
  const void* blob = state->blob.data();
  const size_t blob_size = state->blob.size();

  Result<BlobHeader> header = BlobHeader::Parse(blob, blob_size);
  if (!header.ok()) {
    return header.error();
  }
  Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
      header->Metadata(blob), header->required_features, header->format_version);
  if (!metadata.ok()) {
    return metadata.error();
  }
  // The program's named data: where a portable engine's nested XNNPACK weights live.
  Result<std::unique_ptr<Engine>> engine =
      CreateEngine(metadata->engine, header->Payload(blob),
                   static_cast<size_t>(header->payload_size), context.get_named_data_map());
  if (!engine.ok()) {
    return engine.error();
  }
  state->engine = std::move(engine.get());
  Result<BindingPlan> plan = BindingPlan::Create(metadata.get(), *state->engine);
  if (!plan.ok()) {
    return plan.error();
  }
  state->plan.reset(new (std::nothrow) BindingPlan(std::move(plan.get())));
  if (state->plan == nullptr) {
    return Error::MemoryAllocationFailed;
  }
  return static_cast<DelegateHandle*>(state.release());
}

Error TensorRTBackend::execute(executorch::runtime::BackendExecutionContext& /*context*/,
                               DelegateHandle* handle, Span<EValue*> args) const {
  if (handle == nullptr) {
    ET_LOG(Error, "executorch_trt: execute called with a null handle.");
    return Error::InvalidState;
  }
  auto* state = static_cast<DelegateState*>(handle);
  return state->plan->Execute(*state->engine, args);
}

void TensorRTBackend::destroy(DelegateHandle* handle) const {
  delete static_cast<DelegateState*>(handle);
}

namespace {

TensorRTBackend& BackendInstance() {
  static TensorRTBackend backend;
  return backend;
}

const Error kRegistration = [] {
  const Error err = executorch::runtime::register_backend(
      executorch::runtime::Backend{kTensorRTBackendId, &BackendInstance()});
  if (err != Error::Ok) {
    ET_LOG(Error,
           "executorch_trt: registering backend '%s' failed (error 0x%" PRIx32
           "); is the "
           "library loaded twice (statically and as libexecutorch_trt.so)?",
           kTensorRTBackendId, static_cast<uint32_t>(err));
  }
  return err;
}();

}  // namespace
}  // namespace executorch_trt
