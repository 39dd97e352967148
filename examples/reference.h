// reference.h: the eager-PyTorch reference that kv_cache_decode_check compares against.
//
// Written by examples/export_kv_cache_decode.py (format
// "executorch_trt.kv_cache_decode_reference/1", JSON):
//   kv_cache: "inplace" | "copy_back"
//   prompt:  [T token ids]
//   caches:  [{name, shape, dtype:"float32"}]  the KV cache buffers by FQN
//   steps:   [{step, token, logits:[V floats] (last position; greedy token = argmax),
//             cache_checksums:{name:[sum, weighted sum, sum |x|, weighted sum |x|]}}]
//            (examples/decoder_model.py cache_checksum: weights 1 + flat index mod 1021)
//            step 0 = after prefill, step k = after the k-th decode step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace executorch_trt::examples {

struct CacheSpec {
  std::string name;            // buffer FQN, e.g. "inner.key_cache_0"
  std::vector<int64_t> shape;  // [batch, kv_heads, max_seq_len, head_dim]
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

struct Reference {
  // "inplace" or "copy_back": how the program was exported. The runner fails on any state
  // copied whatever this says (DESIGN.md "In place"); for "copy_back" its message says to use
  // --allow-state-copies.
  std::string kv_cache;
  std::vector<int64_t> prompt;
  std::vector<CacheSpec> caches;
  std::vector<ReferenceStep> steps;
  int64_t vocab_size = 0;
};

// Reads and validates `path`. On failure returns false and sets `error` to a message
// naming the file and what is wrong (missing, not JSON, missing or mistyped field,
// inconsistent sizes). Never throws.
bool LoadReference(const std::string& path, Reference* out, std::string* error);

}  // namespace executorch_trt::examples
