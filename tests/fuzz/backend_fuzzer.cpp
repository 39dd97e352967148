// Copyright (c) executorch-trt authors.
//
// backend_fuzzer: the whole delegate as ExecuTorch drives it. Each input is a delegate blob
// (seeded with the real blob of tests/cpp/testdata/make_kv_testdata.py); its checksum is
// recomputed after mutation (fuzz_support.h ResealChecksum) so changed metadata, payload
// header, descriptor and nested-program bytes all reach the parsers and the nested program
// loader behind the check. TensorRTBackend::init runs on it; when init accepts the blob, one
// execute() runs with arguments built from the blob's own metadata (zero-filled tensors of
// its dtypes and shapes; an aliased output is passed the same value as its input, as the
// in-place export does), and the handle is destroyed. Any crash, sanitizer report or leak is a
// bug: init must reject what execute cannot run.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

#include "core/backend/tensorrt_backend.h"
#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using executorch::runtime::BackendInterface;
using executorch::runtime::DelegateHandle;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch_trt::BlobHeader;
using executorch_trt::DelegateMetadata;
using executorch_trt::TensorBinding;

// Tensors larger than this are not allocated (execute is skipped): the fuzzer looks for
// memory errors, not for the allocator's limits.
constexpr size_t kMaxTensorBytes = size_t{1} << 22;

BackendInterface* g_backend = nullptr;

// A zero-filled contiguous tensor with the binding's dtype and shape, and its EValue.
struct ArgTensor {
  std::vector<int32_t> sizes, strides;
  std::vector<uint8_t> dim_order;
  std::vector<uint8_t> storage;
  std::unique_ptr<executorch::runtime::etensor::TensorImpl> impl;
  std::unique_ptr<EValue> value;
};

std::unique_ptr<ArgTensor> MakeArg(const TensorBinding& binding) {
  auto t = std::make_unique<ArgTensor>();
  size_t numel = 1;
  for (int64_t d : binding.shape) {
    if (d < 0 || d > INT32_MAX) return nullptr;
    t->sizes.push_back(static_cast<int32_t>(d));
    if (d != 0 && numel > kMaxTensorBytes / static_cast<size_t>(d)) return nullptr;
    numel *= static_cast<size_t>(d);
  }
  const size_t element = executorch::runtime::elementSize(binding.dtype);
  if (numel > kMaxTensorBytes / element) return nullptr;
  t->storage.assign(numel * element, 0);
  t->strides.assign(t->sizes.size(), 1);
  for (size_t i = t->sizes.size(); i > 1; --i) {
    t->strides[i - 2] = t->strides[i - 1] * t->sizes[i - 1];
  }
  for (size_t i = 0; i < t->sizes.size(); ++i) t->dim_order.push_back(static_cast<uint8_t>(i));
  t->impl = std::make_unique<executorch::runtime::etensor::TensorImpl>(
      binding.dtype, static_cast<ssize_t>(t->sizes.size()), t->sizes.data(), t->storage.data(),
      t->dim_order.data(), t->strides.data());
  t->value = std::make_unique<EValue>(executorch::aten::Tensor(t->impl.get()));
  return t;
}

// One execute() on `handle` with arguments from the metadata of `blob` (which init accepted).
void ExecuteOnce(const std::vector<uint8_t>& blob, DelegateHandle* handle) {
  executorch::runtime::Result<BlobHeader> header = BlobHeader::Parse(blob.data(), blob.size());
  executorch_trt::fuzz::Check(header.ok(), "init accepted a blob whose header does not parse");
  executorch::runtime::Result<DelegateMetadata> metadata =
      DelegateMetadata::Parse(header->Metadata(blob.data()), header->required_features);
  executorch_trt::fuzz::Check(metadata.ok(), "init accepted a blob whose metadata is invalid");
  std::vector<std::unique_ptr<ArgTensor>> tensors;
  std::vector<EValue*> args;
  for (const TensorBinding& input : metadata->inputs) {
    tensors.push_back(MakeArg(input));
    if (tensors.back() == nullptr) return;
    args.push_back(tensors.back()->value.get());
  }
  for (const TensorBinding& output : metadata->outputs) {
    EValue* arg = nullptr;
    for (const auto& alias : metadata->aliased_io) {
      if (alias.output != output.name) continue;
      for (size_t i = 0; i < metadata->inputs.size(); ++i) {
        if (metadata->inputs[i].name == alias.input) arg = args[i];
      }
    }
    if (arg == nullptr) {
      tensors.push_back(MakeArg(output));
      if (tensors.back() == nullptr) return;
      arg = tensors.back()->value.get();
    }
    args.push_back(arg);
  }
  executorch::runtime::BackendExecutionContext context;
  (void)g_backend->execute(context, handle,
                           executorch::runtime::Span<EValue*>(args.data(), args.size()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  executorch_trt::fuzz::InitRuntimeForFuzzing();
  g_backend = executorch::runtime::get_backend_class(executorch_trt::kTensorRTBackendId);
  executorch_trt::fuzz::Check(g_backend != nullptr, "TensorRTBackend is registered");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The delegate borrows the blob until destroy (as it borrows ExecuTorch's processed
  // buffer), so it lives in this frame.
  std::vector<uint8_t> blob(data, data + size);
  executorch_trt::fuzz::ResealChecksum(&blob);
  FreeableBuffer processed(blob.data(), blob.size(), nullptr);
  executorch::runtime::BackendInitContext init_context(/*runtime_allocator=*/nullptr);
  executorch::runtime::Result<DelegateHandle*> handle =
      g_backend->init(init_context, &processed, {});
  if (!handle.ok()) return 0;
  ExecuteOnce(blob, handle.get());
  g_backend->destroy(handle.get());
  return 0;
}
