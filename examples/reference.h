// reference.h: the eager-PyTorch reference that the runners (kv_cache_decode_check,
// cross_attn_decode_check) compare against.
//
// Two JSON formats share their fields:
//
// "executorch_trt.kv_cache_decode_reference/1" (examples/export_kv_cache_decode.py), a
// decoder-only model, one conversation:
//   kv_cache: "inplace" | "copy_back"
//   prompt:  [T token ids]
//   caches:  [{name, shape, dtype:"float32"}]  the KV cache buffers by FQN
//   steps:   [{step, token, logits:[V floats] (last position; greedy token = argmax),
//             cache_checksums:{name:[sum, weighted sum, sum |x|, weighted sum |x|]}}]
//            (examples/decoder_model.py cache_checksum: weights 1 + flat index mod 1021)
//            step 0 = after prefill, step k = after the k-th decode step.
//   prompts: (optional) [{prompt:[T' token ids], steps:[as above]}]: further conversations,
//            each from empty caches, with prompts of other lengths for the same loaded
//            program (a prefill exported with a dynamic length). Each has at
//            least one step; their steps count independently of the main conversation's.
//
// "executorch_trt.cross_attn_decode_reference/1" (examples/export_cross_attn_decode.py), an
// encoder-decoder model whose cross-attention caches are written once per utterance, several
// utterances decoded one after the other on one load (the caller zeroes the cross caches
// between them; the self caches are not zeroed):
//   kv_cache, prompt: as above (the prompt is the decoder prefix of every utterance)
//   caches:  [{name, shape, dtype:"float32", kind:"self"|"cross"}]
//   utterances: [{input_features:{shape, data}, encoder_hidden_states:{shape, data},
//                 steps:[as above]}]  (every utterance has the same number of steps)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "extension/program/float_tensor.h"

namespace executorch_trt::examples {

using extension::FloatTensor;

struct CacheSpec {
  std::string name;            // buffer FQN, e.g. "inner.key_cache_0"
  std::vector<int64_t> shape;  // [batch, kv_heads, positions, head_dim]
  // A cross-attention cache ("kind": "cross"): computed from the encoder output on the first
  // call of an utterance, then only read until the caller zeroes it.
  bool cross = false;
  int64_t numel() const;
};

// [sum(x), sum(x * w), sum(|x|), sum(|x| * w)] with w = 1 + (i mod 1021) over the flattened
// float32 cache, in double. The second term is position-sensitive (a row written at the
// wrong index changes it); the last two are the scales tolerances are relative to.
using Checksum = std::vector<double>;
Checksum CacheChecksum(const float* data, int64_t numel);

struct ReferenceStep {
  int step = 0;
  int64_t token = 0;          // greedy argmax of `logits`
  std::vector<float> logits;  // last-position logits, [vocab_size]
  std::map<std::string, Checksum> cache_checksums;
};

// One conversation: encode (encoder-decoder only), prefill the prompt, decode greedily.
struct Utterance {
  FloatTensor input_features;         // encode's input; empty for a decoder-only model
  FloatTensor encoder_hidden_states;  // encode's reference output; empty for decoder-only
  std::vector<ReferenceStep> steps;   // step 0 = after prefill, step k = after decode step k
};

// A further conversation of a decoder-only reference ("prompts"): its own prompt, of any
// length the program's prefill takes, and its steps from empty caches.
struct PromptRun {
  std::vector<int64_t> prompt;
  std::vector<ReferenceStep> steps;  // step 0 = after prefill
};

struct Reference {
  // The cross_attn_decode_reference format: an encoder-decoder model (utterances have input
  // features, caches may be cross caches).
  bool encoder_decoder = false;
  // "inplace" or "copy_back": how the program was exported. The runner fails on any state
  // copied whatever this says (the in-place contract: a step copies no state); for
  // "copy_back" its message says to use --allow-state-copies.
  std::string kv_cache;
  std::vector<int64_t> prompt;
  std::vector<CacheSpec> caches;
  // At least one; exactly one for decoder-only. All have the same number of steps (>= 1).
  std::vector<Utterance> utterances;
  // Decoder-only only: further prompts, each from empty caches (may be empty).
  std::vector<PromptRun> prompts;
  int64_t vocab_size = 0;

  // Decode steps per utterance (steps after the prefill step 0).
  int decode_steps() const { return static_cast<int>(utterances[0].steps.size()) - 1; }
  size_t num_cross_caches() const;
};

// Reads and validates `path` (either format). On failure returns false and sets `error` to a
// message naming the file and what is wrong (missing, not JSON, unknown format, missing or
// mistyped field, inconsistent sizes, a value that is not a finite float32). Never throws.
bool LoadReference(const std::string& path, Reference* out, std::string* error);

// The same on reference JSON already in memory (`text`); `path` only names it in `error`.
// `out` must be a default-constructed Reference. Never throws, never reads outside `text`
// (fuzzed by //tests/fuzz:reference_json_fuzzer).
bool ParseReference(std::string_view text, const std::string& path, Reference* out,
                    std::string* error);

}  // namespace executorch_trt::examples
