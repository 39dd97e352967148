// Copyright (c) executorch-trt authors.
//
// empty_named_data_map.h: a NamedDataMap with no keys.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <executorch/runtime/core/named_data_map.h>

namespace executorch_trt {

// What the portable engine hands its nested method when the program has no named data at all
// (BackendInitContext::get_named_data_map() is null: a program exported with
// external_weights=True loaded without its .ptd). ExecuTorch 1.5.1's XNNPACK backend
// dereferences a null map when it looks up a weight (a segfault, verified); given this map
// it logs the missing key and fails init with Error::NotFound instead. Every lookup returns
// Error::NotFound; get_num_keys() returns 0. Stateless and thread-safe.
class EmptyNamedDataMap final : public executorch::runtime::NamedDataMap {
 public:
  executorch::runtime::Result<const executorch::runtime::TensorLayout> get_tensor_layout(
      std::string_view /*key*/) const override {
    return executorch::runtime::Error::NotFound;
  }
  executorch::runtime::Result<executorch::runtime::FreeableBuffer> get_data(
      std::string_view /*key*/) const override {
    return executorch::runtime::Error::NotFound;
  }
  executorch::runtime::Error load_data_into(std::string_view /*key*/, void* /*buffer*/,
                                            size_t /*size*/) const override {
    return executorch::runtime::Error::NotFound;
  }
  executorch::runtime::Result<uint32_t> get_num_keys() const override { return 0; }
  executorch::runtime::Result<const char*> get_key(uint32_t /*index*/) const override {
    return executorch::runtime::Error::NotFound;
  }
};

}  // namespace executorch_trt
