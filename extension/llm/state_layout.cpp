// Copyright (c) executorch-trt authors.

#include "extension/llm/state_layout.h"

#include <algorithm>
#include <cstring>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace executorch_trt::extension::llm {

bool IsIntegerScalar(const BufferLayout& b) {
  if (b.nbytes != b.element_size) {
    return false;  // not one element
  }
  switch (b.dtype) {
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Short:
    case ScalarType::Char:
    case ScalarType::Byte:
      return true;
    default:
      return false;  // floating point, bool, or a type not counted in
  }
}

std::optional<int64_t> IntegerScalarValue(const BufferLayout& b, const uint8_t* data) {
  if (!IsIntegerScalar(b)) {
    return std::nullopt;
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
      return std::nullopt;  // IsIntegerScalar took no other dtype
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

namespace {

BufferLayout Describe(const NamedBuffer& named) {
  BufferLayout b;
  b.name = named.name;
  b.dtype = named.dtype;
  b.sizes = named.sizes;
  b.nbytes = named.nbytes;
  b.element_size = executorch::runtime::elementSize(named.dtype);
  return b;
}

bool SameBytes(const std::vector<uint8_t>& bytes, const BufferBinding& binding) {
  return bytes.size() == binding.nbytes &&
         (bytes.empty() || std::memcmp(bytes.data(), binding.data, bytes.size()) == 0);
}

std::vector<uint8_t> Copy(const BufferBinding& binding) {
  const auto* data = static_cast<const uint8_t*>(binding.data);
  return std::vector<uint8_t>(data, data + binding.nbytes);
}

}  // namespace

std::vector<std::array<int64_t, 3>> StateProbe::TokenSets(int64_t vocab_size) {
  if (vocab_size < 4) {
    const int64_t a = std::min<int64_t>(2, vocab_size - 1);
    const int64_t b = std::min<int64_t>(3, vocab_size - 1);
    return {{a, b, b}};
  }
  std::vector<std::array<int64_t, 3>> sets;
  for (const int64_t a : {int64_t{2}, vocab_size / 2, vocab_size - 2}) {
    const std::array<int64_t, 3> ids = {a, a + 1, a + 1};
    if (std::find(sets.begin(), sets.end(), ids) == sets.end()) {
      sets.push_back(ids);
    }
  }
  return sets;
}

StateProbe::StateProbe(const std::vector<NamedBuffer>& buffers, int64_t capacity) {
  for (const NamedBuffer& named : buffers) {
    buffers_.push_back(Describe(named));
    std::vector<int> dims;
    for (size_t d = 0; d < named.sizes.size(); ++d) {
      if (named.sizes[d] == capacity) {
        dims.push_back(static_cast<int>(d));
      }
    }
    dims_.push_back(std::move(dims));
  }
  last_.resize(buffers_.size());
  written_.resize(buffers_.size());
  rewritten_.assign(buffers_.size(), false);
  silent_.assign(buffers_.size(), false);
  values_.resize(buffers_.size());
}

void StateProbe::Prepare(const std::vector<BufferBinding>& state) {
  if (state.size() != buffers_.size()) {
    return;
  }
  if (steps_ == 0) {
    for (size_t i = 0; i < state.size(); ++i) {
      last_[i] = Copy(state[i]);
      values_[i].push_back(IntegerScalarValue(buffers_[i], last_[i].data()));
    }
  } else if (steps_ == 2) {
    for (size_t i = 0; i < state.size(); ++i) {
      if (!Candidate(i) && last_[i].size() == state[i].nbytes && !last_[i].empty()) {
        std::memcpy(state[i].data, last_[i].data(), last_[i].size());
      }
    }
  }
}

void StateProbe::Observe(const std::vector<BufferBinding>& state) {
  if (steps_ >= kPositions.size() || state.size() != buffers_.size()) {
    return;
  }
  const int64_t position = kPositions[steps_];
  for (size_t i = 0; i < state.size(); ++i) {
    const auto* after = static_cast<const uint8_t*>(state[i].data);
    if (steps_ < 2) {
      written_[i].push_back(
          dims_[i].empty() || last_[i].size() != state[i].nbytes
              ? -1
              : WrittenDim(buffers_[i], last_[i].data(), after, dims_[i], position));
      values_[i].push_back(IntegerScalarValue(buffers_[i], after));
      if (!dims_[i].empty() && SameBytes(last_[i], state[i])) {
        silent_[i] = true;
      }
    } else if (Candidate(i) && !SameBytes(last_[i], state[i])) {
      rewritten_[i] = true;
    }
    if (steps_ == 0 || Candidate(i)) {
      last_[i] = Copy(state[i]);
    }
  }
  ++steps_;
}

bool StateProbe::Candidate(size_t index) const {
  const std::vector<int>& written = written_[index];
  return written.size() == 2 && written[0] >= 0 && written[0] == written[1];
}

std::vector<BufferRole> StateProbe::Roles() const {
  std::vector<BufferRole> roles(buffers_.size());
  if (steps_ != kPositions.size()) {
    return roles;
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (Candidate(i) && !rewritten_[i]) {
      roles[i].positional_dim = written_[i][0];
    }
    const std::vector<std::optional<int64_t>>& v = values_[i];
    roles[i].counter = v.size() == 3 && v[0] == 0 && v[1] == 1 && v[2] == 2;
  }
  return roles;
}

StateLayout StateLayout::Of(const std::vector<NamedBuffer>& buffers, int64_t capacity,
                            const std::vector<BufferRole>& roles) {
  StateLayout layout;
  layout.capacity_ = capacity;
  for (size_t i = 0; i < buffers.size(); ++i) {
    BufferLayout b = Describe(buffers[i]);
    const BufferRole role = i < roles.size() ? roles[i] : BufferRole{};
    const int d = role.positional_dim;
    if (d >= 0 && static_cast<size_t>(d) < b.sizes.size() &&
        b.sizes[static_cast<size_t>(d)] == capacity) {
      b.positional_dim = d;
    }
    if (!b.positional()) {
      b.counter = role.counter && IsIntegerScalar(b);
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
