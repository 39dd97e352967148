// Copyright (c) executorch-trt authors.
//
// reference_json_fuzzer: the runners' reference reader (examples/reference.h ParseReference,
// what kv_cache_decode_check and cross_attn_decode_check load with --reference) on arbitrary
// text. An accepted reference must satisfy what the runners index without further checks: at
// least one utterance, the same number (>= 1) of steps in each, `vocab_size` logits per step,
// every step token and prompt token inside the vocabulary, cache shapes with positive
// dimensions and a checksum of 4 values for every cache at every step.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "examples/reference.h"
#include "tests/fuzz/fuzz_support.h"

using executorch_trt::examples::Reference;
using executorch_trt::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reference ref;
  std::string error;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!executorch_trt::examples::ParseReference(text, "<fuzz input>", &ref, &error)) {
    Check(!error.empty(), "a rejected reference says why");
    return 0;
  }
  Check(!ref.utterances.empty(), "at least one utterance");
  Check(ref.encoder_decoder || ref.utterances.size() == 1, "one utterance when decoder-only");
  Check(ref.vocab_size > 0, "a vocabulary");
  for (int64_t token : ref.prompt) Check(token >= 0 && token < ref.vocab_size, "prompt token");
  for (const auto& cache : ref.caches) {
    for (int64_t d : cache.shape) Check(d > 0, "cache dimensions are positive");
  }
  const size_t steps = ref.utterances[0].steps.size();
  Check(steps >= 1, "at least the prefill step");
  for (const auto& utterance : ref.utterances) {
    Check(utterance.steps.size() == steps, "the same number of steps per utterance");
    for (const auto& step : utterance.steps) {
      Check(step.logits.size() == static_cast<size_t>(ref.vocab_size), "vocab_size logits");
      Check(step.token >= 0 && step.token < ref.vocab_size, "step token in the vocabulary");
      for (const auto& cache : ref.caches) {
        auto it = step.cache_checksums.find(cache.name);
        Check(it != step.cache_checksums.end() && it->second.size() == 4,
              "a 4-value checksum of every cache at every step");
      }
    }
  }
  return 0;
}
