// Copyright (c) executorch-trt authors.
//
// session_file_layout.h: the program session_file_fuzzer reads session files for (a stand-in:
// no program is loaded), and the session its seed holds. A KV cache whose third dimension is
// the position (16 positions), a step counter and a float buffer that is not positional, as
// the programs of tests/cpp/llm_session_test have.

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "extension/llm/session_file.h"
#include "extension/llm/state_layout.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::fuzz {

inline constexpr int64_t kSessionCapacity = 16;

inline extension::llm::StateLayout SessionLayout() {
  using extension::NamedBuffer;
  const std::vector<NamedBuffer> buffers = {
      {"k_cache",
       ScalarType::Float,
       {1, 2, kSessionCapacity, 4},
       2 * kSessionCapacity * 4 * 4,
       {0}},
      {"count", ScalarType::Long, {}, 8, {0}},
      {"total", ScalarType::Float, {1, 4}, 16, {0}},
  };
  // The roles LlmProgram's probe would find: k_cache positional along dimension 2, count a
  // token counter.
  return extension::llm::StateLayout::Of(buffers, kSessionCapacity,
                                         {{2, false}, {-1, true}, {-1, false}});
}

inline extension::llm::ProgramFingerprint SessionFingerprint() {
  return {std::string(64, 'a'), std::nullopt};
}

// A fresh state of SessionLayout(): every buffer zeroed.
inline std::vector<extension::llm::OwnedBuffer> FreshSessionState(
    const extension::llm::StateLayout& layout) {
  std::vector<extension::llm::OwnedBuffer> state;
  for (const auto& b : layout.buffers()) {
    state.emplace_back(b.nbytes);
  }
  return state;
}

// The seed's session: 5 tokens, a snapshot at 3, logits.
inline extension::llm::SessionContents SeedSession(const extension::llm::StateLayout& layout) {
  extension::llm::SessionContents contents;
  contents.tokens = {1, 2, 3, 4, 5};
  contents.state = FreshSessionState(layout);
  for (size_t i = 0; i < contents.state.size(); ++i) {
    for (size_t j = 0; j < contents.state[i].size(); ++j) {
      contents.state[i].data()[j] = static_cast<uint8_t>(i * 31 + j);
    }
  }
  contents.counters = {"count"};
  contents.snapshots[3] = {std::vector<uint8_t>(8, 3), std::vector<uint8_t>(16, 7)};
  contents.logits = std::vector<float>{0.5F, -1.0F, 2.0F};
  return contents;
}

}  // namespace executorch_trt::fuzz
