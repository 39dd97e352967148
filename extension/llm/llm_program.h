// Copyright (c) executorch-trt authors.
//
// llm_program.h: an LLM program (.pte, with its .ptd when it has one) whose conversations are
// objects (session.h): the C++ side of py/executorch_trt/llm/program.py, over the
// loaded-program layer the runners use (extension/program/loaded_program.h).
//
// The program is one of ExecuTorch's LLM forms over a static KV cache held in its named mutable
// buffers:
//   - forward(tokens int64 [1, T], positions int64 [T] or [1]) with a dynamic T (what
//     executorch_trt.llm.export_llm writes and ExecuTorch's TextLLMRunner runs): the prompt
//     in chunks of up to max_seq_len tokens, then one token per call;
//   - prefill(tokens [1, T], positions) and decode(tokens [1, 1], positions [1]) sharing the
//     cache; a prefill exported for one length T takes prompts in chunks of exactly T, and the
//     rest goes through decode one token at a time.
// `positions` is every token's position ([T]: transformers' cache_position) or the first
// one's ([1]: ExecuTorch's input_pos), as the method declares it. The LLM runner's metadata
// methods are read when present (llm_metadata.h): get_max_context_len (cache positions; else
// get_max_seq_len, as the runner does), get_max_seq_len (tokens per call), get_vocab_size,
// get_bos_id, get_eos_ids, enable_dynamic_shape. A program without them needs
// `max_context_len` given.
//
// The delegate must be linked into the process (//core:executorch_trt_static) for a program
// that has TensorRTBackend delegates, as for LoadedProgram.

#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/llm/session_file.h"
#include "extension/llm/state_layout.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::extension::llm {

class Session;

// A loaded LLM program (header comment); make one with Load().
//
// Ownership: held by std::shared_ptr; every Session holds one, so the program lives as long as
// its last session. It owns its LoadedProgram; sessions own their state.
//
// Thread-safety: the accessors are immutable after Load(). Sessions created from one program may
// be used from different threads: each step binds the session's state and runs under one hold
// of the program's lock (the sessions' calls on the program are serialized, and none sees
// another's state). NewSession, LoadSession and fingerprint() may be called from any thread.
class LlmProgram : public std::enable_shared_from_this<LlmProgram> {
 public:
  // Loads the program at `path` (and its external data file `data_path`, empty: none) with
  // every method, reads its metadata methods, and checks it is an LLM program.
  // `max_context_len` (0: from the metadata) is the KV cache's positions for a program without
  // get_max_context_len / get_max_seq_len; with get_max_context_len it must be 0 or equal it.
  //
  // On failure returns the error and sets *error to a message naming `path` and the problem:
  //   - LoadedProgram::LoadFile's (the file does not load, a method or the data file does not);
  //   - a metadata method that fails or returns no integer (ReadLlmMetadata);
  //   - Error::InvalidProgram: no forward and no prefill+decode; a method whose inputs are not
  //     (tokens int64 [1, T], positions int64 [T] or [1]); a decode taking more than one token;
  //     get_max_seq_len larger than the prefill method takes, or below 1; a forward with a fixed
  //     T > 1 and no decode; no named mutable buffers (export with
  //     emit_mutable_buffer_names=True); a decode method whose first output is not logits;
  //     a decode method that fails on the probe tokens (state_layout.h); no buffer the probe
  //     finds to be a KV cache of max_context_len positions (the buffers' shapes are listed);
  //   - Error::InvalidArgument: no max_context_len from the metadata nor the caller ("pass
  //     max_context_len"), one below 2, or one that contradicts get_max_context_len
  //     ("max_context_len 8 contradicts the program's get_max_context_len (32): leave it out
  //     or pass 32").
  static Result<std::shared_ptr<LlmProgram>> Load(const std::string& path, std::string* error,
                                                  const std::string& data_path = "",
                                                  int64_t max_context_len = 0);

  LlmProgram(const LlmProgram&) = delete;
  LlmProgram& operator=(const LlmProgram&) = delete;
  ~LlmProgram();

  const std::string& path() const { return path_; }
  const std::string& data_path() const { return data_path_; }
  // The methods a session calls: "forward" for both, or "prefill" and "decode".
  const std::string& prefill_method() const { return prefill_method_; }
  const std::string& decode_method() const { return decode_method_; }
  // The most tokens a session holds (the KV cache's positions).
  int64_t max_context_len() const { return layout_.capacity(); }
  // The most tokens one call takes: a longer prompt runs in chunks of it.
  int64_t max_seq_len() const { return max_seq_len_; }
  // Token ids are in [0, vocab_size()): get_vocab_size, else the width of decode's logits.
  int64_t vocab_size() const { return vocab_size_; }
  std::optional<int64_t> bos_id() const { return bos_id_; }
  // get_eos_ids (possibly empty): stop tokens for Session::Generate.
  const std::vector<int64_t>& eos_ids() const { return eos_ids_; }
  // Whether the prefill method takes any number of tokens up to max_seq_len() (else exactly
  // max_seq_len(); the rest of a prompt runs one token at a time through decode).
  bool prefill_is_dynamic() const { return prefill_is_dynamic_; }
  // Whether positions are the first token's only ([1]) rather than every token's ([T]).
  bool positions_are_start() const { return positions_are_start_; }
  // Which buffers are positional (state_layout.h).
  const StateLayout& layout() const { return layout_; }

  // A new, empty conversation with its own state (every buffer at its initial value: the
  // program's, zeros for a buffer the program leaves zero).
  std::unique_ptr<Session> NewSession();

  // The conversation Session::Save wrote to `path` (by this library or by
  // executorch_trt.llm), restored bit for bit. Errors (*error names the file and the problem;
  // nothing is loaded, no other session is touched): ReadSessionFile's (Error::AccessFailed
  // for a file that cannot be read; Error::InvalidArgument for a truncated, corrupted, newer
  // or another program's file, naming what differs); Error::InvalidArgument for a held id
  // outside the vocabulary or logits of another width than decode's; fingerprint()'s.
  Result<std::unique_ptr<Session>> LoadSession(const std::string& path, std::string* error);

  // What a saved session must match: the BLAKE2b-256 of the .pte and .ptd, computed on first
  // use (the files are read again then) and kept. Error::AccessFailed (with *error) when a file
  // can no longer be read.
  Result<ProgramFingerprint> fingerprint(std::string* error);

 private:
  friend class Session;

  LlmProgram() = default;

  // Checks the program (Load's errors), reading `metadata`; fills the members.
  Error Init(int64_t max_context_len, std::string* error);
  // (most tokens per call, whether positions are the first token's only) of `method`.
  Error CheckSignature(const std::string& method, int64_t* tokens, bool* positions_are_start,
                       std::string* error);

  // One call of the program for a session: binds `state` (every buffer), runs `ids` (n tokens)
  // at positions start .. start + n - 1 through the decode method (n == 1) or the prefill
  // method, and copies the last token's logits (as float32) into *logits. All under one hold of
  // the program's lock. Errors: Error::Internal for a method that rejects its inputs or fails
  // (*error has ExecuTorch's code), Error::InvalidProgram for output 0 that is not logits,
  // BindBuffers' errors.
  Error Run(const std::vector<BufferBinding>& state, const int64_t* ids, size_t n, int64_t start,
            std::vector<float>* logits, std::string* error);

  // Sets *roles to what StateProbe finds (state_layout.h): each buffer's role from the first
  // token set that changes it, counters from the first set. Error::InvalidProgram (*error
  // names the method, the token and ExecuTorch's code) when the method fails on a token.
  Error Probe(int64_t capacity, std::vector<BufferRole>* roles, std::string* error);
  // Runs `ids` at StateProbe::kPositions through the decode method on a fresh state
  // (probe_state_), feeding *probe.
  Error RunProbe(const std::array<int64_t, 3>& ids, StateProbe* probe, std::string* error);
  // Fresh state: every buffer at its initial value, in the program's order.
  std::vector<OwnedBuffer> NewState() const;
  // Buffer `index`'s initial value as the program holds it (its nbytes bytes; empty: zeros).
  const std::vector<uint8_t>& InitialBytes(size_t index) const;
  // Writes buffer `index`'s initial value (the program's, zeros when it has none) to `to`
  // (its nbytes bytes).
  void InitialValue(size_t index, uint8_t* to) const;

  std::string path_;
  std::string data_path_;
  std::unique_ptr<LoadedProgram> program_;
  std::mutex mu_;  // held by Run: one call (bind + execute + logits) at a time
  std::string prefill_method_;
  std::string decode_method_;
  int64_t max_seq_len_ = 0;
  int64_t vocab_size_ = 0;
  int64_t logits_width_ = 0;  // the last dimension of decode's first output
  std::optional<int64_t> bos_id_;
  std::vector<int64_t> eos_ids_;
  bool prefill_is_dynamic_ = false;
  bool positions_are_start_ = false;
  StateLayout layout_;
  // The state Probe ran (still bound to the program until a session binds its own).
  std::vector<OwnedBuffer> probe_state_;
  std::mutex fingerprint_mu_;
  std::optional<ProgramFingerprint> fingerprint_;
};

}  // namespace executorch_trt::extension::llm
