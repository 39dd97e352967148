// Copyright (c) executorch-trt authors.
//
// prefill_decode_program.h: a loaded prefill/decode program whose KV caches the caller can
// own. kv_cache_decode_check and cross_attn_decode_check run on it, and an application links
// it (//extension/program:prefill_decode_program), together with the LoadedProgram it is
// built on (loaded_program.h: shared arenas, buffers by name, binding); both depend only on
// ExecuTorch, not on the delegate.
//
// The program (a .pte) has two methods that share their KV caches:
//   prefill(input_ids int64 [1, T], cache_position int64 [T])  -> logits float32 [1, T, V]
//     (T any length in the range prefill was exported with: a torch.export.Dim; ExecuTorch
//     resizes the inputs within their upper bound, the delegate checks the range)
//   decode(input_ids int64 [1, 1], cache_position int64 [1])   -> logits float32 [1, 1, V]
// An encoder-decoder program (Load with `encoder`) has a third method and a third input:
//   encode(input_features float32 [...])                      -> encoder states float32 [...]
//   prefill(input_ids, cache_position, encoder_states)         -> logits
//   decode(input_ids, cache_position, encoder_states)          -> logits
// whose cross-attention caches are computed from encoder_states by the first call of an
// utterance and reused by later calls until the caller zeroes them (a new utterance).
// exported with `emit_mutable_buffer_names=True` (each cache can be found by its name) and
// `MemoryPlanningPass(share_mutable_buffers=True)` (both methods place a cache at the same
// offset of one arena); executorch_trt.export does both by default.
//
// Load() loads the methods with LoadedProgram, which puts them in shared memory arenas the way
// `Module(path, ..., share_memory_arenas=true)` does, so prefill and decode see one cache, and
// after a fresh load every cache is zero (unless the program gives it an initial value). Every
// method is loaded before anything runs: loading a method re-initialises the program's shared
// mutable buffers, so a method loaded later would reset the caches. Load() then looks up every
// cache by name in prefill and decode.
//
// Who holds the caches:
//   - ExecuTorch, by default: each cache lives in the shared arena and prefill and decode
//     update it in place; one conversation per loaded program.
//   - The caller, after BindCaches(): every cache tensor of every method points at memory
//     the caller owns (LoadedProgram::BindBuffer, i.e.
//     `executorch::runtime::internal::set_tensor_data`) and the delegate updates that memory
//     in place. Binding another conversation's memory before its next call gives any number
//     of isolated conversations on one loaded program. (Export with
//     `alloc_mutable_buffers=False` as well if ExecuTorch should not allocate the caches at
//     all; then bind before the first call.)

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>

#include "extension/program/float_tensor.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::extension {

// One of the program's methods.
enum class Phase {
  kPrefill,  // method "prefill": the prompt, from an empty cache
  kDecode,   // method "decode": one token at a time
  kEncode,   // method "encode" (encoder-decoder programs only): features -> encoder states
};

// The method's name: "prefill", "decode" or "encode".
const char* PhaseName(Phase phase);

// A cache the program must hold: a float32 mutable buffer of `numel` elements.
struct CacheBuffer {
  std::string name;  // the buffer's name in the program, e.g. "key_cache_0"
  int64_t numel = 0;
};

// A .pte loaded with its prefill and decode methods (and encode) and their cache tensors.
//
// Ownership: the object owns its LoadedProgram (the file's data loader, the Program, the
// memory arenas and the Methods). The tensors cache() returns belong to it and stay valid for
// its lifetime. Memory bound with BindCaches() stays the caller's: the object never frees it,
// and it must outlive every Prefill()/Decode() until other memory is bound or the object is
// destroyed. Logits are copied out to the caller.
//
// Thread-safety: none. Use one object from one thread at a time: its methods share arenas,
// so even prefill on one thread and decode on another would race. Separate objects share
// nothing and may run concurrently.
class PrefillDecodeProgram {
 public:
  // Loads the program at `path` with full flatbuffer verification (a corrupted file is
  // rejected, never executed), prefill and decode (and encode, if `encoder`) into shared
  // arenas, and the tensor of each of `caches` in prefill and decode (cache() index = position
  // in `caches`).
  //
  // On failure returns the ExecuTorch error and sets *error to a message naming `path`:
  //   - LoadedProgram::LoadFile's: the file does not open or is not an ExecuTorch program; a
  //     method that is missing or does not load, e.g. a delegate rejects its blob (ExecuTorch
  //     has logged the reason); a buffer the methods declare with different dtypes or shapes;
  //   - a cache name that is not a named mutable buffer of prefill and decode (Error::NotFound;
  //     the message lists the names the program has; none means it was exported without
  //     emit_mutable_buffer_names=True);
  //   - a cache that is not float32 with `numel` elements (Error::InvalidProgram);
  //   - a cache name listed twice (Error::InvalidArgument: BindCaches would bind one of the
  //     two memories only).
  // `data_path` (empty: none): the program's external data file (.ptd), as
  // LoadedProgram::LoadFile takes it (a program exported with external_weights=True).
  static executorch::runtime::Result<std::unique_ptr<PrefillDecodeProgram>> Load(
      const std::string& path, const std::vector<CacheBuffer>& caches, std::string* error,
      bool encoder = false, const std::string& data_path = "");

  PrefillDecodeProgram(const PrefillDecodeProgram&) = delete;
  PrefillDecodeProgram& operator=(const PrefillDecodeProgram&) = delete;
  ~PrefillDecodeProgram();

  size_t num_caches() const { return caches_.size(); }

  bool has_encoder() const { return methods_[2] != nullptr; }

  // Cache `index` (< num_caches()) as the `phase` method (kPrefill or kDecode) sees it. Its
  // data pointer is the arena's storage until BindCaches(), then the memory last bound. The
  // caller may write it between calls (e.g. zero a cross-attention cache for a new utterance).
  const executorch::aten::Tensor& cache(Phase phase, size_t index) const;

  // The `phase` method's metadata (input and output shapes, planned memory). kEncode needs
  // has_encoder().
  executorch::runtime::MethodMeta method_meta(Phase phase) const;

  // Points cache i of every method at (*memory)[i], for every i: the caller owns the memory
  // and the delegate updates it in place. The memory's contents are used as they are (zero
  // them for a new conversation).
  //
  // Errors (*error says which cache): `memory` does not hold num_caches() buffers of each
  // cache's numel (Error::InvalidArgument, nothing bound); LoadedProgram::BindBuffers' (all
  // caches are bound in one call: its checks bind nothing on an error).
  executorch::runtime::Error BindCaches(std::vector<std::vector<float>>* memory,
                                        std::string* error);

  // Runs encode (needs has_encoder()) on `features` and copies its first output, float32,
  // into *states (an activation: the next execute would overwrite it in the arena).
  //
  // Errors (with *error): Error::InvalidState without an encode method; the method's own
  // (set_input, e.g. features of another shape than the exported one, or execute);
  // Error::InvalidProgram if it returns no float32 tensor.
  executorch::runtime::Error Encode(const FloatTensor& features, FloatTensor* states,
                                    std::string* error);

  // Runs prefill on `prompt` (positions 0 .. T-1) and copies the last position's logits into
  // *logits (V floats). `context`, if not null, is passed as the third input (an
  // encoder-decoder program's encoder states, from Encode()).
  //
  // Errors (with *error): the method's own (Method::set_input or Method::execute, e.g. a
  // prompt whose length is not the exported T); Error::InvalidProgram if the method returns
  // no logits tensor or one that is not float32 [1, T, V].
  executorch::runtime::Error Prefill(const std::vector<int64_t>& prompt, std::vector<float>* logits,
                                     std::string* error, const FloatTensor* context = nullptr);

  // Runs decode on `token` at cache position `position` and copies its logits into *logits.
  // `context` as for Prefill. Errors as Prefill (logits must be float32 [1, 1, V]).
  executorch::runtime::Error Decode(int64_t token, int64_t position, std::vector<float>* logits,
                                    std::string* error, const FloatTensor* context = nullptr);

 private:
  PrefillDecodeProgram() = default;

  executorch::runtime::Error Run(Phase phase, const std::vector<int64_t>& tokens, int64_t start,
                                 const FloatTensor* context, std::vector<float>* logits,
                                 std::string* error);

  std::unique_ptr<LoadedProgram> program_;
  std::vector<CacheBuffer> caches_;
  executorch::runtime::Method* methods_[3] = {};  // by Phase; encode's only with an encoder
  // Prefill's and decode's tensor of each cache, in caches_ order.
  std::vector<executorch::aten::Tensor> cache_tensors_[2];
};

}  // namespace executorch_trt::extension
