// Copyright (c) executorch-trt authors.
//
// state_layout.h: which of an LLM program's mutable buffers hold one entry per token position
// (the KV caches), and which do not; the same rule as py/executorch_trt/llm/state_layout.py.
//
// A session's state is every mutable buffer of the program. Two kinds matter:
//   - positional buffers (the KV caches): one dimension equals the cache's capacity
//     (max_context_len positions); the entry at position p is written when the token at p runs
//     and only read by later tokens under the causal mask. Entries past the tokens a session
//     holds are never read before they are written again, so keeping the first n positions
//     keeps everything that matters (rewind copies nothing; fork and save copy the held part).
//     When several dimensions equal the capacity (head_dim 64, 64 positions), the shape cannot
//     tell [B, H, S, D] from a transposed key cache [B, H, D, S], and a wrong guess would make
//     forks and saved sessions keep the wrong entries; a probe decides (LlmProgram runs one
//     token at position 0 on a fresh state: the dimension along which it wrote exactly one
//     entry, at index 0, WrittenDim).
//   - other buffers: everything else (a buffer with no dimension of the capacity, or several
//     that the probe cannot decide), e.g. transformers' per-layer `cumulative_length` step
//     counters, or a sliding window's ring buffer smaller than the capacity. A session keeps
//     and restores them whole.

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::extension::llm {

// One buffer of the program, classified.
struct BufferLayout {
  std::string name;
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> sizes;
  size_t nbytes = 0;
  size_t element_size = 0;
  // The dimension indexed by position; -1 for an "other" buffer.
  int positional_dim = -1;

  bool positional() const { return positional_dim >= 0; }
};

// The value of buffer `b` whose whole contents are at `data` when it is an integer scalar (one
// element of an integer dtype, not bool): what a token counter is (session.h); none otherwise.
std::optional<int64_t> IntegerScalarValue(const BufferLayout& b, const uint8_t* data);

// The dimension of `dims` along which the entries of buffer `b` (sizes, element size) that
// differ, bit for bit, between `before` and `after` (its bytes before and after one token ran
// at `position`) all have index `position`; -1 when no dimension or more than one does (also
// for a write at another index: a ring buffer, a sink slot, which keeping the first n entries
// would get wrong). A KV cache written for one token changes one entry along its position
// dimension and many along the others.
int WrittenDim(const BufferLayout& b, const uint8_t* before, const uint8_t* after,
               const std::vector<int>& dims, int64_t position = 0);

// Decides the position dimension of buffer `index` (of the buffers given to StateLayout::Of),
// one of `dims` (all of the capacity), or returns -1 (an other buffer).
using PositionProbe = std::function<int(size_t index, const std::vector<int>& dims)>;

// The buffers of one program for a cache of `capacity` positions, in the program's order
// (LoadedProgram::buffers()). Immutable after Of(); thread-safe to read.
class StateLayout {
 public:
  // Classifies `buffers` (header comment). A buffer with several dimensions of `capacity` is
  // positional along the one `probe` returns; without a probe it is an other buffer.
  static StateLayout Of(const std::vector<NamedBuffer>& buffers, int64_t capacity,
                        const PositionProbe& probe = nullptr);

  int64_t capacity() const { return capacity_; }
  const std::vector<BufferLayout>& buffers() const { return buffers_; }
  // Indices (into buffers()) of the other buffers, in the program's order.
  const std::vector<size_t>& other() const { return other_; }
  bool has_positional() const { return other_.size() < buffers_.size(); }

  // The index of the buffer named `name`, or buffers().size() when there is none.
  size_t Find(std::string_view name) const;

  // The shape of the part of buffer `index` that `positions` held tokens use: `positions`
  // along its positional dimension, the whole shape for an other buffer.
  std::vector<int64_t> HeldSizes(size_t index, int64_t positions) const;
  // Bytes of that part.
  size_t HeldBytes(size_t index, int64_t positions) const;
  // Bytes of every buffer's held part (what a fork copies, what a saved session stores).
  size_t HeldBytes(int64_t positions) const;

  // Calls `piece(offset, size)` for each contiguous run of bytes (offsets into the whole buffer,
  // in order) that makes up the held part of buffer `index`: one run for an other buffer or
  // when the positional dimension is the outermost, else one per outer index.
  template <typename Piece>
  void ForEachHeldPiece(size_t index, int64_t positions, Piece piece) const {
    const BufferLayout& b = buffers_[index];
    if (!b.positional()) {
      piece(size_t{0}, b.nbytes);
      return;
    }
    size_t outer = 1;
    size_t inner = b.element_size;
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      if (static_cast<int>(d) < b.positional_dim) {
        outer *= static_cast<size_t>(b.sizes[d]);
      } else if (static_cast<int>(d) > b.positional_dim) {
        inner *= static_cast<size_t>(b.sizes[d]);
      }
    }
    const size_t stride = static_cast<size_t>(capacity_) * inner;
    for (size_t o = 0; o < outer; ++o) {
      piece(o * stride, static_cast<size_t>(positions) * inner);
    }
  }

  // Copies the held part of buffer `index` from the whole buffer `from` to the whole buffer
  // `to` (both buffers().at(index).nbytes bytes, not overlapping).
  void CopyHeld(size_t index, int64_t positions, const uint8_t* from, uint8_t* to) const;

 private:
  int64_t capacity_ = 0;
  std::vector<BufferLayout> buffers_;
  std::vector<size_t> other_;
};

}  // namespace executorch_trt::extension::llm
