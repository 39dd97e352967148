// Copyright (c) executorch-trt authors.
//
// constant_layouts_data_map.h: the NamedDataMap the portable engine loads its nested method
// with: the outer program's named data, plus the layouts of the nested method's external
// constants from the payload descriptor.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <executorch/runtime/core/named_data_map.h>

#include "core/engine/portable/portable_payload.h"

namespace executorch_trt {

// Why: the nested method's external constants (docs/formats/portable_payload.md, "constants") live
// in the outer program's named data. Method::parse_external_constants asks its NamedDataMap for
// each constant's TensorLayout before its data, and a program's own named data has none
// (ExecuTorch 1.5.1's PteDataMap::get_tensor_layout returns NotImplemented). This map answers
// get_tensor_layout for the descriptor's keys from the descriptor and forwards everything else
// to `base`.
//
// It also checks what ExecuTorch 1.5.1 does not: a buffer returned for a descriptor key must
// have exactly the layout's byte size, else the nested method would read past it
// (Error::InvalidExternalData, logged with the key and both sizes; the method load fails).
// Keys outside the descriptor (XNNPACK's weights) are forwarded unchecked: their users check
// them.
//
// `base` is borrowed and must outlive this map. Immutable after construction: thread-safe
// when `base` is.
class ConstantLayoutsDataMap final : public executorch::runtime::NamedDataMap {
 public:
  ConstantLayoutsDataMap(const executorch::runtime::NamedDataMap* base,
                         std::vector<ConstantLayoutSpec> constants);
  // Not copyable or movable: index_by_key_ views the keys in constants_.
  ConstantLayoutsDataMap(const ConstantLayoutsDataMap&) = delete;
  ConstantLayoutsDataMap& operator=(const ConstantLayoutsDataMap&) = delete;

  // The descriptor's layout for `key`; else `base`'s answer. Error::NotFound (logged, naming
  // the key and the .ptd) when `key` is a descriptor constant that `base` reports missing.
  executorch::runtime::Result<const executorch::runtime::TensorLayout> get_tensor_layout(
      std::string_view key) const override;
  // `base`'s data for `key`; Error::InvalidExternalData if `key` is a descriptor constant
  // and the data's size differs from the layout's nbytes.
  executorch::runtime::Result<executorch::runtime::FreeableBuffer> get_data(
      std::string_view key) const override;
  // `base`'s load_data_into (ExecuTorch uses it for mutable data, which the payload has none
  // of).
  executorch::runtime::Error load_data_into(std::string_view key, void* buffer,
                                            size_t size) const override;
  executorch::runtime::Result<uint32_t> get_num_keys() const override;
  executorch::runtime::Result<const char*> get_key(uint32_t index) const override;

 private:
  const ConstantLayoutSpec* Find(std::string_view key) const;
  executorch::runtime::Error CheckSize(const ConstantLayoutSpec& spec, size_t size) const;

  const executorch::runtime::NamedDataMap* base_;
  std::vector<ConstantLayoutSpec> constants_;
  std::unordered_map<std::string_view, size_t> index_by_key_;  // views into constants_
};

}  // namespace executorch_trt
