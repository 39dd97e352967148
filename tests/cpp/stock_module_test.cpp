// Copyright (c) executorch-trt authors.
//
// ExecuTorch's own C++ `Module` (the pinned wheel's SDK) on the example prefill/decode program
// (examples/kv_cache_decode.pte, whose delegates run on the portable engine, on the CPU). With
// `share_memory_arenas = true` both methods see one cache, and greedy decoding equals the eager
// reference's tokens and logits at every step. With ExecuTorch's default (false), each method
// gets its own planned memory: prefill's token is right, decode's logits are not. That default
// is how ExecuTorch 1.5.1's TextLLMRunner builds its Module (docs/guide/llm.md); when the
// second test fails, update that page.

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

namespace executorch_trt {
namespace {

using executorch::extension::make_tensor_ptr;
using executorch::extension::Module;

constexpr char kProgram[] = "examples/kv_cache_decode.pte";
constexpr char kReference[] = "examples/kv_cache_decode_reference.json";
constexpr float kTolerance = 1e-4f;

nlohmann::json ReadReference() {
  std::ifstream in(kReference);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

int64_t Argmax(const float* logits, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) best = logits[i] > logits[best] ? i : best;
  return static_cast<int64_t>(best);
}

// The largest absolute difference between the last position's logits and the reference's.
float MaxDiff(const executorch::aten::Tensor& logits, const nlohmann::json& want) {
  const size_t vocab = want.size();
  const float* last = logits.const_data_ptr<float>() + (logits.numel() - vocab);
  float diff = 0;
  for (size_t i = 0; i < vocab; ++i) {
    diff = std::fmax(diff, std::fabs(last[i] - want[i].get<float>()));
  }
  return diff;
}

struct Step {
  int64_t token;
  float max_diff;
};

// Prefill the reference prompt, then greedy decode steps, through `module`; every method is
// loaded before the first runs (loading one re-initialises the shared buffers).
std::vector<Step> Generate(Module& module, const nlohmann::json& reference) {
  std::vector<Step> steps;
  EXPECT_EQ(module.load_method("prefill"), executorch::runtime::Error::Ok);
  EXPECT_EQ(module.load_method("decode"), executorch::runtime::Error::Ok);
  const auto& want = reference["steps"];
  auto record =
      [&](const executorch::runtime::Result<std::vector<executorch::runtime::EValue>>& out) {
        if (!out.ok()) {
          ADD_FAILURE() << "step " << steps.size() << ": error " << static_cast<int>(out.error());
          return false;
        }
        const auto& logits = out.get()[0].toTensor();
        const auto& expected = want[steps.size()]["logits"];
        const size_t vocab = expected.size();
        const float* last = logits.const_data_ptr<float>() + (logits.numel() - vocab);
        steps.push_back({Argmax(last, vocab), MaxDiff(logits, expected)});
        return true;
      };
  const auto prompt = reference["prompt"].get<std::vector<int64_t>>();
  const auto n = static_cast<executorch::aten::SizesType>(prompt.size());
  std::vector<int64_t> positions(prompt.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  if (!record(module.execute("prefill",
                             {make_tensor_ptr({1, n}, prompt), make_tensor_ptr({n}, positions)}))) {
    return steps;
  }
  for (int64_t position = n; steps.size() < want.size(); ++position) {
    const std::vector<int64_t> token = {steps.back().token};
    if (!record(module.execute("decode", {make_tensor_ptr({1, 1}, token),
                                          make_tensor_ptr({1}, std::vector<int64_t>{position})}))) {
      break;
    }
  }
  return steps;
}

class StockModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reference_ = ReadReference();
    ASSERT_TRUE(reference_.is_object()) << kReference;
    ASSERT_GE(reference_["steps"].size(), 3u);
  }
  nlohmann::json reference_;
};

TEST_F(StockModuleTest, SharedArenasGenerateTheReference) {
  Module module(kProgram, Module::LoadMode::File, nullptr, nullptr, nullptr,
                /*share_memory_arenas=*/true);
  const auto steps = Generate(module, reference_);
  ASSERT_EQ(steps.size(), reference_["steps"].size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].token, reference_["steps"][i]["token"].get<int64_t>()) << "step " << i;
    EXPECT_LE(steps[i].max_diff, kTolerance) << "step " << i;
  }
}

TEST_F(StockModuleTest, TheDefaultGivesDecodeAnotherCache) {
  Module module(kProgram);
  const auto steps = Generate(module, reference_);
  ASSERT_EQ(steps.size(), reference_["steps"].size());
  EXPECT_EQ(steps[0].token, reference_["steps"][0]["token"].get<int64_t>());
  EXPECT_LE(steps[0].max_diff, kTolerance) << "prefill";
  EXPECT_GT(steps[1].max_diff, 1e-2f) << "decode saw prefill's cache";
}

}  // namespace
}  // namespace executorch_trt
