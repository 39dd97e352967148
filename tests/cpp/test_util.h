// Copyright (c) executorch-trt authors.
//
// test_util.h: helpers shared by the C++ tests: blob and payload writers (the same
// byte layout as docs/formats/delegate_blob.md and docs/formats/portable_payload.md), owning tensor
// holders, test data paths, the kv test model in closed form, and a descriptive Engine for
// BindingPlan validation tests.

#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

#include "core/blob/blob_header.h"
#include "core/blob/checksum.h"
#include "core/engine/engine.h"
#include "core/engine/portable/portable_payload.h"

namespace executorch_trt {
namespace testing {

inline void PutU32(std::vector<uint8_t>* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void PutU64(std::vector<uint8_t>* out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*out)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

// Recomputes the checksum field of `blob` (written by MakeBlob: metadata at 64, payload
// last) over [64, end).
inline void ResealBlob(std::vector<uint8_t>* blob) {
  PutU64(blob, kBlobOffsetChecksum,
         Blake2b64(blob->data() + kBlobMinHeaderSize, blob->size() - kBlobMinHeaderSize));
}

// Writes a blob of `version` (default 1): 64-byte header, metadata at 64, payload
// 16-aligned after it. With kBlobFeatureChecksum in `features` the checksum field is filled
// in (the default, 0b11, writes a blob as an older writer did: no checksum, field 0).
inline std::vector<uint8_t> MakeBlob(const std::string& metadata,
                                     const std::vector<uint8_t>& payload, uint64_t features = 0b11,
                                     uint32_t version = kBlobFormatVersionMin) {
  const size_t payload_offset = Align16(kBlobMinHeaderSize + metadata.size());
  std::vector<uint8_t> blob(payload_offset + payload.size(), 0);
  std::memcpy(blob.data() + kBlobOffsetMagic, kBlobMagic, sizeof(kBlobMagic));
  PutU32(&blob, kBlobOffsetHeaderSize, kBlobMinHeaderSize);
  PutU32(&blob, kBlobOffsetFormatVersion, version);
  PutU64(&blob, kBlobOffsetRequiredFeatures, features);
  PutU64(&blob, kBlobOffsetMetadataOffset, kBlobMinHeaderSize);
  PutU64(&blob, kBlobOffsetMetadataSize, metadata.size());
  PutU64(&blob, kBlobOffsetPayloadOffset, payload_offset);
  PutU64(&blob, kBlobOffsetPayloadSize, payload.size());
  std::memcpy(blob.data() + kBlobMinHeaderSize, metadata.data(), metadata.size());
  if (!payload.empty()) std::memcpy(blob.data() + payload_offset, payload.data(), payload.size());
  if ((features & kBlobFeatureChecksum) != 0) ResealBlob(&blob);
  return blob;
}

// Writes a portable engine payload of version kPortablePayloadVersion around `program`
// (.pte bytes).
inline std::vector<uint8_t> MakePortablePayload(const std::string& descriptor,
                                                const std::vector<uint8_t>& program) {
  const size_t program_offset = Align16(kPortablePayloadHeaderSize + descriptor.size());
  std::vector<uint8_t> out(program_offset + program.size(), 0);
  std::memcpy(out.data() + kPortablePayloadOffsetMagic, kPortablePayloadMagic,
              sizeof(kPortablePayloadMagic));
  PutU32(&out, kPortablePayloadOffsetVersion, kPortablePayloadVersion);
  PutU64(&out, kPortablePayloadOffsetDescriptorSize, descriptor.size());
  PutU64(&out, kPortablePayloadOffsetProgramOffset, program_offset);
  PutU64(&out, kPortablePayloadOffsetProgramSize, program.size());
  std::memcpy(out.data() + kPortablePayloadHeaderSize, descriptor.data(), descriptor.size());
  std::memcpy(out.data() + program_offset, program.data(), program.size());
  return out;
}

// Directory of the generated test data (tests/cpp/testdata/make_kv_testdata.py):
// $EXECUTORCH_TRT_TESTDATA, else tests/cpp/testdata relative to the working directory
// (the runfiles root under `bazel test`).
inline std::string TestDataPath(const std::string& name) {
  const char* dir = std::getenv("EXECUTORCH_TRT_TESTDATA");
  return std::string(dir != nullptr ? dir : "tests/cpp/testdata") + "/" + name;
}

inline std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

// The kv test model (tests/cpp/testdata/make_kv_testdata.py: kv_blob.bin, nested_kv.pte,
// outer_kv.pte): k_cache_out = k_cache [1, kKvRows, kKvDim] with row pos set to 2x+1;
// y = k_cache_out.sum(dim=1).
inline constexpr int kKvRows = 8;
inline constexpr int kKvDim = 4;

// One step of the kv test model in closed form: row `pos` of *cache (kKvRows * kKvDim floats)
// becomes 2x+1, and *y the column sums of the cache after that.
inline void KvModelStep(std::vector<float>* cache, const std::vector<float>& x, int64_t pos,
                        std::vector<float>* y) {
  for (int d = 0; d < kKvDim; ++d) (*cache)[pos * kKvDim + d] = 2 * x[d] + 1;
  y->assign(kKvDim, 0.0f);
  for (int r = 0; r < kKvRows; ++r)
    for (int d = 0; d < kKvDim; ++d) (*y)[d] += (*cache)[r * kKvDim + d];
}

// An owning contiguous tensor: storage, sizes, strides, dim order and TensorImpl.
template <typename T>
class OwnedTensor {
 public:
  OwnedTensor(executorch::aten::ScalarType dtype, std::vector<int32_t> sizes,
              std::vector<T> values = {})
      : sizes_(std::move(sizes)) {
    size_t numel = 1;
    for (int32_t s : sizes_) numel *= static_cast<size_t>(s);
    data_ = values.empty() ? std::vector<T>(numel) : std::move(values);
    strides_.assign(sizes_.size(), 1);
    for (size_t i = sizes_.size(); i > 1; --i) strides_[i - 2] = strides_[i - 1] * sizes_[i - 1];
    for (size_t i = 0; i < sizes_.size(); ++i) dim_order_.push_back(static_cast<uint8_t>(i));
    impl_ = std::make_unique<executorch::runtime::etensor::TensorImpl>(
        dtype, static_cast<ssize_t>(sizes_.size()), sizes_.data(), data_.data(), dim_order_.data(),
        strides_.data());
  }
  executorch::aten::Tensor tensor() { return executorch::aten::Tensor(impl_.get()); }
  std::vector<T>& data() { return data_; }
  T* ptr() { return data_.data(); }

 private:
  std::vector<int32_t> sizes_;
  std::vector<int32_t> strides_;
  std::vector<uint8_t> dim_order_;
  std::vector<T> data_;
  std::unique_ptr<executorch::runtime::etensor::TensorImpl> impl_;
};

// An Engine that only describes bindings (for BindingPlan validation tests). Execute()
// is not supported: execution is tested end to end with the real PortableEngine.
class DescribedEngine final : public Engine {
 public:
  struct Tensor {
    std::string name;
    TensorIOMode mode;
    executorch::aten::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  DescribedEngine(std::vector<Tensor> tensors, std::map<std::string, AliasReport> aliases)
      : tensors_(std::move(tensors)), aliases_(std::move(aliases)) {}

  int32_t NumIOTensors() const override { return static_cast<int32_t>(tensors_.size()); }
  std::string IOTensorName(int32_t i) const override {
    return i >= 0 && static_cast<size_t>(i) < tensors_.size() ? tensors_[i].name : "";
  }
  TensorIOMode IOMode(const std::string& name) const override {
    const Tensor* t = Find(name);
    return t ? t->mode : TensorIOMode::kNone;
  }
  executorch::runtime::Result<executorch::aten::ScalarType> TensorDType(
      const std::string& name) const override {
    const Tensor* t = Find(name);
    if (!t) return executorch::runtime::Error::NotFound;
    return t->dtype;
  }
  executorch::runtime::Result<std::vector<int64_t>> TensorShape(
      const std::string& name) const override {
    const Tensor* t = Find(name);
    if (!t) return executorch::runtime::Error::NotFound;
    return t->shape;
  }
  AliasReport AliasedInput(const std::string& name) const override {
    auto it = aliases_.find(name);
    if (it != aliases_.end()) return it->second;
    return AliasReport{AliasReport::Status::kNotAliased, ""};
  }
  executorch::runtime::Error SetInputShape(const std::string&,
                                           const std::vector<int64_t>&) override {
    return executorch::runtime::Error::NotSupported;
  }
  executorch::runtime::Error SetTensorAddress(const std::string&, void*, size_t) override {
    return executorch::runtime::Error::NotSupported;
  }
  executorch::runtime::Error Execute() override { return executorch::runtime::Error::NotSupported; }
  executorch::runtime::Result<std::vector<int64_t>> OutputShape(const std::string&) const override {
    return executorch::runtime::Error::NotSupported;
  }

 private:
  const Tensor* Find(const std::string& name) const {
    for (const Tensor& t : tensors_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  std::vector<Tensor> tensors_;
  std::map<std::string, AliasReport> aliases_;
};

}  // namespace testing
}  // namespace executorch_trt
