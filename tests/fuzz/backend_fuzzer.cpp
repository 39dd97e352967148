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

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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
#include "core/common/little_endian.h"
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

// How far inputs got, printed at exit when EXECUTORCH_TRT_FUZZ_STATS is set (to see that
// mutated blobs do reach execute, not only the parsers).
struct Stats {
  uint64_t inputs = 0, inits_accepted = 0, executes_ok = 0;
  ~Stats() {
    if (std::getenv("EXECUTORCH_TRT_FUZZ_STATS") != nullptr) {
      std::fprintf(stderr,
                   "backend_fuzzer: %" PRIu64 " inputs, %" PRIu64 " accepted by init, %" PRIu64
                   " executed successfully\n",
                   inputs, inits_accepted, executes_ok);
    }
  }
};
Stats g_stats;

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
  executorch::runtime::Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
      header->Metadata(blob.data()), header->required_features, header->format_version);
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
  if (g_backend->execute(context, handle,
                         executorch::runtime::Span<EValue*>(args.data(), args.size())) ==
      executorch::runtime::Error::Ok) {
    ++g_stats.executes_ok;
  }
}

}  // namespace

// libFuzzer's own mutator (weak: the replay build has none and never mutates).
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size,
                                                         size_t max_size);

// Structure-aware mutation (used by libFuzzer builds; the replay driver never calls it): half
// the time libFuzzer's own mutation of the whole blob; otherwise a size-preserving mutation of
// a few bytes of one section, the metadata JSON or the payload (descriptor and nested
// program), so every
// offset around it stays valid and the mutated bytes reach the parsers and the nested
// program's loader instead of failing the header's range checks. The checksum is recomputed
// either way (LLVMFuzzerTestOneInput reseals too, for inputs from elsewhere).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  uint64_t begin = 0, length = 0;
  if (size >= executorch_trt::kBlobMinHeaderSize && seed % 2 == 1) {
    const bool metadata = (seed / 2) % 3 == 0;  // one time in three: the metadata
    begin = executorch_trt::ReadU64(data + (metadata ? executorch_trt::kBlobOffsetMetadataOffset
                                                     : executorch_trt::kBlobOffsetPayloadOffset));
    length = executorch_trt::ReadU64(data + (metadata ? executorch_trt::kBlobOffsetMetadataSize
                                                      : executorch_trt::kBlobOffsetPayloadSize));
    if (begin > size || length > size - begin || length == 0) length = 0;
  }
  std::vector<uint8_t> blob;
  if (length > 0) {
    // Mutate a window of 1 to 16 bytes of the section (most of a nested program is flatbuffer
    // offsets: changing many at once rarely gets past its verifier), then write back as many
    // bytes as the window has now.
    const uint64_t window = std::min<uint64_t>(length, 1 + (seed >> 8) % 16);
    const uint64_t at = begin + (seed >> 12) % (length - window + 1);
    std::vector<uint8_t> part(data + at, data + at + window);
    const size_t mutated = LLVMFuzzerMutate(part.data(), part.size(), part.size());
    std::copy(part.begin(), part.begin() + mutated, data + at);
  } else {
    size = LLVMFuzzerMutate(data, size, max_size);
  }
  blob.assign(data, data + size);
  executorch_trt::fuzz::ResealChecksum(&blob);
  std::copy(blob.begin(), blob.end(), data);
  return size;
}

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  executorch_trt::fuzz::InitRuntimeForFuzzing();
  g_backend = executorch::runtime::get_backend_class(executorch_trt::kTensorRTBackendId);
  executorch_trt::fuzz::Check(g_backend != nullptr, "TensorRTBackend is registered");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The delegate borrows the blob until destroy (as it borrows ExecuTorch's processed
  // buffer), so it lives in this frame.
  ++g_stats.inputs;
  std::vector<uint8_t> blob(data, data + size);
  executorch_trt::fuzz::ResealChecksum(&blob);
  FreeableBuffer processed(blob.data(), blob.size(), nullptr);
  executorch::runtime::BackendInitContext init_context(/*runtime_allocator=*/nullptr);
  executorch::runtime::Result<DelegateHandle*> handle =
      g_backend->init(init_context, &processed, {});
  if (!handle.ok()) return 0;
  ++g_stats.inits_accepted;
  ExecuteOnce(blob, handle.get());
  g_backend->destroy(handle.get());
  return 0;
}
