// Copyright (c) executorch-trt authors.

#include "extension/llm/state_layout.h"

#include <algorithm>
#include <cstring>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace executorch_trt::extension::llm {

std::optional<int64_t> IntegerScalarValue(const BufferLayout& b, const uint8_t* data) {
  if (b.nbytes != b.element_size) {
    return std::nullopt;  // not one element
  }
  switch (b.dtype) {
    case ScalarType::Long: {
      int64_t v;
      std::memcpy(&v, data, 8);
      return v;
    }
    case ScalarType::Int: {
      int32_t v;
      std::memcpy(&v, data, 4);
      return v;
    }
    case ScalarType::Short: {
      int16_t v;
      std::memcpy(&v, data, 2);
      return v;
    }
    case ScalarType::Char:
      return static_cast<int8_t>(*data);
    case ScalarType::Byte:
      return *data;
    default:
      return std::nullopt;  // floating point, bool, or a type not counted in
  }
}

int WrittenDim(const BufferLayout& b, const uint8_t* before, const uint8_t* after,
               const std::vector<int>& dims, int64_t position) {
  const size_t rank = b.sizes.size();
  std::vector<size_t> stride(rank, 1);  // elements
  for (size_t d = rank; d-- > 1;) {
    stride[d - 1] = stride[d] * static_cast<size_t>(b.sizes[d]);
  }
  std::vector<std::vector<bool>> touched;
  for (int d : dims) {
    touched.emplace_back(static_cast<size_t>(b.sizes[static_cast<size_t>(d)]), false);
  }
  const size_t elements = b.element_size == 0 ? 0 : b.nbytes / b.element_size;
  for (size_t i = 0; i < elements; ++i) {
    const size_t at = i * b.element_size;
    if (std::memcmp(before + at, after + at, b.element_size) == 0) {
      continue;
    }
    for (size_t k = 0; k < dims.size(); ++k) {
      const size_t d = static_cast<size_t>(dims[k]);
      touched[k][(i / stride[d]) % static_cast<size_t>(b.sizes[d])] = true;
    }
  }
  int found = -1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (std::count(touched[k].begin(), touched[k].end(), true) != 1 || position < 0 ||
        static_cast<size_t>(position) >= touched[k].size() ||
        !touched[k][static_cast<size_t>(position)]) {
      continue;  // not one index, or not the token's position (a ring buffer, a sink slot)
    }
    if (found >= 0) {
      return -1;  // two dimensions with one index each: one entry changed, which says nothing
    }
    found = dims[k];
  }
  return found;
}

StateLayout StateLayout::Of(const std::vector<NamedBuffer>& buffers, int64_t capacity,
                            const PositionProbe& probe) {
  StateLayout layout;
  layout.capacity_ = capacity;
  for (const NamedBuffer& named : buffers) {
    BufferLayout b;
    b.name = named.name;
    b.dtype = named.dtype;
    b.sizes = named.sizes;
    b.nbytes = named.nbytes;
    b.element_size = executorch::runtime::elementSize(named.dtype);
    std::vector<int> dims;
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      if (b.sizes[d] == capacity) {
        dims.push_back(static_cast<int>(d));
      }
    }
    b.positional_dim = -1;
    if (dims.size() == 1) {
      b.positional_dim = dims.front();
    } else if (dims.size() > 1 && probe) {
      const int d = probe(layout.buffers_.size(), dims);
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
        b.positional_dim = d;
      }
    }
    if (b.positional_dim < 0) {
      layout.other_.push_back(layout.buffers_.size());
    }
    layout.buffers_.push_back(std::move(b));
  }
  return layout;
}

size_t StateLayout::Find(std::string_view name) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].name == name) {
      return i;
    }
  }
  return buffers_.size();
}

std::vector<int64_t> StateLayout::HeldSizes(size_t index, int64_t positions) const {
  std::vector<int64_t> sizes = buffers_[index].sizes;
  if (buffers_[index].positional()) {
    sizes[buffers_[index].positional_dim] = positions;
  }
  return sizes;
}

size_t StateLayout::HeldBytes(size_t index, int64_t positions) const {
  size_t total = 0;
  ForEachHeldPiece(index, positions, [&](size_t, size_t size) { total += size; });
  return total;
}

size_t StateLayout::HeldBytes(int64_t positions) const {
  size_t total = 0;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    total += HeldBytes(i, positions);
  }
  return total;
}

void StateLayout::CopyHeld(size_t index, int64_t positions, const uint8_t* from,
                           uint8_t* to) const {
  ForEachHeldPiece(index, positions, [&](size_t offset, size_t size) {
    std::memcpy(to + offset, from + offset, size);
  });
}

}  // namespace executorch_trt::extension::llm
