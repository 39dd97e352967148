// Copyright (c) executorch-trt authors.
//
// state_layout.h: which of an LLM program's mutable buffers hold one entry per token position
// (the KV caches), and which do not; the same rule as py/executorch_trt/llm/state_layout.py.
//
// A session's state is every mutable buffer of the program. Two kinds matter:
//   - positional buffers (the KV caches): one dimension has the cache's capacity
//     (max_context_len positions); the entry at position p is written when the token at p runs.
//     A session keeps the entries past the tokens it holds at their initial values, so keeping
//     the first n positions keeps everything that matters (a rewind copies no held entry and
//     resets the dropped ones; fork and save copy the held part).
//   - other buffers: everything else, e.g. transformers' per-layer `cumulative_length` step
//     counters, or a sliding window's ring buffer smaller than the capacity. A session keeps
//     and restores them whole. An other buffer is a token counter when it is an integer scalar
//     that counts the tokens run: a rewind sets it to the kept count instead of restoring it.
//
// The shape alone cannot tell which buffers are positional (a transposed key cache [B, H, D, S]
// with D == S, a table indexed by token id as long as the capacity, a ring buffer written from
// its end, a per-position counter), and treating such a buffer as a KV cache makes forks, saved
// sessions and rewinds keep the wrong entries. So LlmProgram asks the program (StateProbe): on a
// fresh state the decode method runs token 2 at position 0, token 3 at position 1, then token 3
// at position 1 again after a rewind to one token. A buffer is positional along dimension d (of
// the capacity) when the first two tokens changed entries at their own position only along d
// and along no other such dimension (WrittenDim), and the repeated token changed nothing (an
// accumulating write changes it again). A counter held 0, 1, 2 before and after the first two.
// py/executorch_trt/llm/state_layout.py applies the same rules.

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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
  // An other buffer that is a token counter (header comment).
  bool counter = false;

  bool positional() const { return positional_dim >= 0; }
};

// Whether buffer `b` is an integer scalar (one element of an integer dtype, not bool): what a
// token counter is (session.h).
bool IsIntegerScalar(const BufferLayout& b);

// The value of buffer `b` whose whole contents are at `data` when it is an integer scalar
// (IsIntegerScalar); none otherwise.
std::optional<int64_t> IntegerScalarValue(const BufferLayout& b, const uint8_t* data);

// The dimension of `dims` along which the entries of buffer `b` (sizes, element size) that
// differ, bit for bit, between `before` and `after` (its bytes before and after one token ran
// at `position`) all have index `position`; -1 when no dimension or more than one does (also
// for a write at another index: a ring buffer, a sink slot, which keeping the first n entries
// would get wrong). A KV cache written for one token changes one entry along its position
// dimension and many along the others.
int WrittenDim(const BufferLayout& b, const uint8_t* before, const uint8_t* after,
               const std::vector<int>& dims, int64_t position = 0);

// A buffer's role, as StateProbe finds it: its position dimension (-1: none) and whether it
// is a token counter.
struct BufferRole {
  int positional_dim = -1;
  bool counter = false;
};

// Finds the roles of a program's buffers from what the probe tokens write (header comment).
// The caller runs ids[k] (one of TokenSets(vocab)) at kPositions[k] through the decode method
// on one fresh state, in order, calling Prepare before and Observe after each, then reads
// Roles(). A buffer a probe token left unchanged (Silent: an id whose embedding row is zero,
// such as a padding id, writes zeros into a zero cache) is decided by the next token set that
// changes it (LlmProgram).
//
// Before the repeated token, Prepare rewinds the state to one token as a session would if the
// buffers that look positional so far are: they are left as they are, every other buffer gets
// its value after the first token back (which sets a token counter to 1). The probe keeps one
// copy of each buffer: at most one state's worth of memory. Not thread-safe.
class StateProbe {
 public:
  static constexpr std::array<int64_t, 3> kPositions = {0, 1, 1};
  // The ids to run at kPositions, in the order to try them: {a, a + 1, a + 1} for a = 2, the
  // middle of the vocabulary and its end (ids unequal to their positions, below vocab_size).
  // A vocabulary of fewer than 4 ids has one set, its ids capped at the last one.
  static std::vector<std::array<int64_t, 3>> TokenSets(int64_t vocab_size);

  // `buffers` in the program's order (LoadedProgram::buffers()); `capacity` positions.
  StateProbe(const std::vector<NamedBuffer>& buffers, int64_t capacity);

  // `state`: every buffer, in the program's order (the bytes a binding points at).
  void Prepare(const std::vector<BufferBinding>& state);
  void Observe(const std::vector<BufferBinding>& state);
  // One per buffer, in the program's order; all "other" unless every probe token was observed.
  std::vector<BufferRole> Roles() const;
  // Whether buffer `index` has a dimension of the capacity and one of the first two probe
  // tokens left it unchanged: the probe could not decide it.
  bool Silent(size_t index) const { return silent_[index]; }

 private:
  bool Candidate(size_t index) const;

  std::vector<BufferLayout> buffers_;
  std::vector<std::vector<int>> dims_;  // per buffer: its dimensions of the capacity
  // Per buffer: its bytes after the last token observed (after the second: kept only for the
  // candidates; the others keep their value after the first, to restore).
  std::vector<std::vector<uint8_t>> last_;
  std::vector<std::vector<int>> written_;  // per buffer: WrittenDim of the first two tokens
  std::vector<bool> rewritten_;            // per buffer: the repeated token changed it
  std::vector<bool> silent_;               // per buffer: Silent()
  std::vector<std::vector<std::optional<int64_t>>> values_;  // per buffer: integer scalar values
  size_t steps_ = 0;
};

// The buffers of one program for a cache of `capacity` positions, in the program's order
// (LoadedProgram::buffers()). Immutable after Of(); thread-safe to read.
class StateLayout {
 public:
  // The layout of `buffers` for a cache of `capacity` positions, with `roles` (one per buffer,
  // StateProbe::Roles(); missing ones are "other"). A positional dimension that is not of
  // `capacity` is ignored, and only an integer scalar that is not positional is a counter.
  static StateLayout Of(const std::vector<NamedBuffer>& buffers, int64_t capacity,
                        const std::vector<BufferRole>& roles);

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
    ForEachPiece(index, 0, positions, piece);
  }

  // Calls `piece(offset, size)` for each contiguous run of bytes that holds the entries of
  // positional buffer `index` at positions begin .. end - 1; nothing for an other buffer or a
  // range outside 0 <= begin <= end <= capacity.
  template <typename Piece>
  void ForEachPiece(size_t index, int64_t begin, int64_t end, Piece piece) const {
    const BufferLayout& b = buffers_[index];
    if (!b.positional() || begin < 0 || begin > end || end > capacity_) {
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
      piece(o * stride + static_cast<size_t>(begin) * inner,
            static_cast<size_t>(end - begin) * inner);
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
