// Copyright (c) executorch-trt authors.
//
// session.h: one conversation with an LLM program (llm_program.h), whose state (every mutable
// buffer: the KV caches, step counters) is memory the session owns. The C++ side of
// py/executorch_trt/llm/session.py, with the same semantics.
//
// Each call binds the session's state (LoadedProgram::BindBuffers) and runs under one hold of
// the program's lock, so sessions are isolated and may run from different threads; the delegate
// updates the session's memory in place (a step copies no state). What a session keeps, and why
// its operations are cheap (state_layout.h):
//   - tokens(): the ids it holds, at positions 0 .. position() - 1;
//   - the KV caches: the entry at position p is the token at p's; entries past position() hold
//     their initial values. So Rewind(n) copies no held entry (it resets the dropped ones), and
//     Fork() copies only the first position() entries;
//   - the other buffers (e.g. transformers' per-layer cumulative_length counters, which say
//     where the next token is written): a token counter (state_layout.h) that has held the
//     number of tokens held after every call is set to n by Rewind(n); any other is restored
//     from its value after the call that ended at the nearest held position <= n (a snapshot),
//     else from the program's initial values (a fresh state's: the implicit snapshot at
//     position 0), and the tokens after that position are run again. Snapshots only save that
//     work: one is taken after every call, and the oldest are dropped so that they total at
//     most the session's snapshot budget (kSnapshotBudget unless set_snapshot_budget says
//     otherwise; none are kept when one alone is larger), so a rewind is never refused.
//
// Errors are returned, never thrown or aborted on: Error::InvalidArgument for bad input (no
// tokens, an id outside [0, vocab_size), more tokens than fit, a rewind outside [0, position],
// a negative count), Error::InvalidState for decoding or generating on an empty session,
// and the program's errors
// (Error::Internal when a method fails: a run failure) from LlmProgram::Run; *error says what.
// Nothing runs when the input is refused.

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/llm/llm_program.h"
#include "extension/llm/session_file.h"

namespace executorch_trt::extension::llm {

// Ownership: the session owns its state and holds its program (which lives as long as its last
// session). Memory addresses of the state never change for the session's lifetime.
//
// Thread-safety: every member takes the session's own lock, so calls on one session are
// serialized (from any threads); different sessions of one program may run concurrently (their
// steps take turns on the program's lock). Generate's `on_token` runs without the lock.
class Session {
 public:
  // The most bytes of snapshots (of the non-positional buffers, one per call boundary) a session
  // keeps by default; the oldest are dropped first. A program whose non-positional buffers total
  // more keeps none (a rewind then runs the kept tokens again from the initial values).
  static constexpr size_t kSnapshotBudget = size_t{16} << 20;

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  const std::shared_ptr<LlmProgram>& program() const { return program_; }

  // How many tokens the session holds; the next token goes at this position.
  int64_t position() const;
  // The ids it holds, in order (a copy).
  std::vector<int64_t> tokens() const;

  // Runs `tokens` (at least one) after the ones held, in chunks of at most max_seq_len; returns
  // the logits of the last one (float32 [logits width], a copy). Errors: no tokens, an id
  // outside the vocabulary (naming its index), more tokens than fit (saying how many do); a
  // failure of the program (chunks that ran before it stay held).
  Result<std::vector<float>> Prefill(const std::vector<int64_t>& tokens, std::string* error);

  // Runs one token after the ones held; returns its logits. Errors: Error::InvalidState on an
  // empty session (prefill a prompt first); as Prefill otherwise.
  Result<std::vector<float>> Decode(int64_t token, std::string* error);

  // Generates up to `max_new_tokens` tokens greedily (each the highest logit of the one before,
  // the lowest id on a tie), each run before the next is chosen, so the session holds every
  // token returned; `on_token` (may be null) is called with each right after it ran. Stops after
  // a token of `stop_tokens` (held and returned too) or when the cache is full. A rewind or a
  // load may have dropped the last token's logits: it is then run again first. Errors:
  // Error::InvalidArgument for a negative `max_new_tokens`; Error::InvalidState on an empty
  // session; a failure of the program (the tokens generated before it stay held: tokens()).
  Result<std::vector<int64_t>> Generate(int64_t max_new_tokens,
                                        const std::vector<int64_t>& stop_tokens, std::string* error,
                                        const std::function<void(int64_t)>& on_token = nullptr);

  // Keeps the first `n` tokens; the next token goes at position n. Later calls give what a
  // session that never held the dropped tokens gives. Copies no held cache entry: the dropped
  // positions' entries are reset to their initial values (ResetDropped). Non-positional buffers
  // that are not counters are restored from the nearest snapshot at or before n, else from the
  // program's initial values, and the tokens from there to n run again. Errors:
  // Error::InvalidArgument for n outside [0, position()]; a failure of the program while
  // running those tokens again.
  Error Rewind(int64_t n, std::string* error);

  // The most bytes of snapshots this session keeps (kSnapshotBudget until set): the oldest are
  // dropped now and after each call until the rest fit; 0 keeps none. Forks inherit it. A
  // smaller budget costs rewinds more tokens run again, never a refusal.
  void set_snapshot_budget(size_t bytes);
  // Bytes of the snapshots kept now (never more than the budget).
  size_t snapshot_bytes() const;
  // The positions of the snapshots kept now, in order.
  std::vector<int64_t> snapshot_positions() const;

  // An independent session holding the same tokens and state: the first position() entries of
  // each cache and the other buffers are copied into new memory (StateLayout::HeldBytes
  // (position()) bytes). The two then diverge independently.
  std::unique_ptr<Session> Fork();

  // Writes the conversation to `path` atomically (session_file.h): token ids, the held part of
  // every buffer, the snapshots and last logits, the program's fingerprint, under a checksum.
  // LlmProgram::LoadSession (or executorch_trt.llm's load_session) restores it. Errors:
  // WriteSessionFile's, LlmProgram::fingerprint's.
  Error Save(const std::string& path, std::string* error);

  // The held part of buffer `name` (state_layout.h), contiguous, a copy: what a fork copies and
  // a file stores. Error::NotFound (with *error) for a name the program does not have.
  Result<std::vector<uint8_t>> HeldBuffer(std::string_view name, std::string* error) const;

  // Where buffer `name` of this session lives (nullptr for an unknown name): it never moves.
  const void* buffer_data(std::string_view name) const;

 private:
  friend class LlmProgram;

  Session(std::shared_ptr<LlmProgram> program, SessionContents contents);
  // The session `saved` (ReadSessionFile's contents) describes.
  static std::unique_ptr<Session> Restored(std::shared_ptr<LlmProgram> program,
                                           SessionContents saved);

  // The caller holds mu_ in all of these.
  int64_t Held() const { return static_cast<int64_t>(contents_.tokens.size()); }
  Error CheckTokens(const std::vector<int64_t>& ids, const char* call, std::string* error) const;
  Error CheckRoom(size_t count, const char* call, std::string* error) const;
  // Runs `ids` after the held tokens in chunks the program takes.
  Error Advance(const std::vector<int64_t>& ids, std::string* error);
  // One call of the program on ids[0, n) at the next positions; updates what the session keeps.
  Error RunChunk(const int64_t* ids, size_t n, std::string* error);
  // After a call: which other buffers are still counters, and a snapshot of the other buffers.
  void Record();
  // Drops the oldest snapshots until they fit in snapshot_budget_ (all when one alone does not).
  void TrimSnapshots();
  Error RewindLocked(int64_t n, std::string* error);
  // Puts the positional buffers' entries at positions begin .. end - 1 back to their initial
  // values, so that every entry past the tokens held is as in a session that never held the
  // dropped tokens (a program may read past its position, e.g. through a validity mask).
  void ResetDropped(int64_t begin, int64_t end);
  // The last held token's logits, run again when a rewind or a load dropped them.
  Error CurrentLogits(const char* call, std::string* error);
  // Whether buffer `index` is an integer scalar holding `count`.
  bool IsCount(size_t index, int64_t count) const;
  void SetCount(size_t index, int64_t count);

  std::shared_ptr<LlmProgram> program_;
  const StateLayout& layout_;
  mutable std::mutex mu_;
  SessionContents contents_;
  // Every buffer bound to contents_.state (the addresses never change).
  std::vector<BufferBinding> bindings_;
  // Bytes of one snapshot (every other buffer whole).
  size_t snapshot_size_ = 0;
  size_t snapshot_budget_ = kSnapshotBudget;
};

}  // namespace executorch_trt::extension::llm
