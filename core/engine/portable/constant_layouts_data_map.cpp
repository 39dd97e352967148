// Copyright (c) executorch-trt authors.

#include "core/engine/portable/constant_layouts_data_map.h"

#include <utility>

#include <executorch/runtime/platform/log.h>

#include "core/common/runtime_types.h"

namespace executorch_trt {

using executorch::runtime::FreeableBuffer;
using executorch::runtime::TensorLayout;

ConstantLayoutsDataMap::ConstantLayoutsDataMap(const executorch::runtime::NamedDataMap* base,
                                               std::vector<ConstantLayoutSpec> constants)
    : base_(base), constants_(std::move(constants)) {
  for (size_t i = 0; i < constants_.size(); ++i) {
    index_by_key_.emplace(constants_[i].key, i);
  }
}

const ConstantLayoutSpec* ConstantLayoutsDataMap::Find(std::string_view key) const {
  auto it = index_by_key_.find(key);
  return it == index_by_key_.end() ? nullptr : &constants_[it->second];
}

Error ConstantLayoutsDataMap::CheckSize(const ConstantLayoutSpec& spec, size_t size) const {
  if (size == spec.nbytes) {
    return Error::Ok;
  }
  ET_LOG(Error,
         "executorch_trt: portable engine: constant '%s' has %zu bytes in the program's data, "
         "its layout needs %zu; the .pte or .ptd is corrupt or from another export.",
         spec.key.c_str(), size, spec.nbytes);
  return Error::InvalidExternalData;
}

Result<const TensorLayout> ConstantLayoutsDataMap::get_tensor_layout(std::string_view key) const {
  const ConstantLayoutSpec* spec = Find(key);
  if (spec == nullptr) {
    return base_->get_tensor_layout(key);
  }
  if (base_->get_tensor_layout(key).error() == Error::NotFound) {
    // A program's own data answers NotImplemented for any key; NotFound comes from a .ptd
    // or from no data at all. Say it before the method's "get_data is not valid".
    ET_LOG(Error,
           "executorch_trt: portable engine: constant '%s' is not in the program's data: "
           "load the program with its .ptd (external_weights=True).",
           spec->key.c_str());
    return Error::NotFound;
  }
  // The spans point into constants_, which lives as long as this map (and the method).
  return TensorLayout::create(Span<const int32_t>(spec->sizes.data(), spec->sizes.size()),
                              Span<const uint8_t>(spec->dim_order.data(), spec->dim_order.size()),
                              spec->scalar_type);
}

Result<FreeableBuffer> ConstantLayoutsDataMap::get_data(std::string_view key) const {
  Result<FreeableBuffer> data = base_->get_data(key);
  const ConstantLayoutSpec* spec = Find(key);
  if (!data.ok() || spec == nullptr) {
    return data;
  }
  Error err = CheckSize(*spec, data->size());
  if (err != Error::Ok) {
    return err;  // `data` frees its buffer here
  }
  return data;
}

Error ConstantLayoutsDataMap::load_data_into(std::string_view key, void* buffer,
                                             size_t size) const {
  return base_->load_data_into(key, buffer, size);  // `base` checks `size` against its data
}

Result<uint32_t> ConstantLayoutsDataMap::get_num_keys() const { return base_->get_num_keys(); }

Result<const char*> ConstantLayoutsDataMap::get_key(uint32_t index) const {
  return base_->get_key(index);
}

}  // namespace executorch_trt
