// Copyright (c) executorch-trt authors.
//
// executorch_trt::gqa_attention.out: values against a direct softmax(q.k * scale + mask) . v
// over repeated heads in double (a different algorithm from the kernel's grouped, chunked
// softmax), for grouped heads, bool and float masks, broadcast masks, a window with a hole,
// is_causal, a fully masked row and spans long enough to be cut into chunks; the positions-read
// counter proves masked positions are skipped; bad input fails the context and writes nothing;
// the kernel is in ExecuTorch's registry.

#include "core/kernels/gqa_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "core/common/runtime_types.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using testing::OwnedTensor;

std::vector<float> Ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(scale * static_cast<float>(i) + offset);
  return v;
}

struct Problem {
  int batch = 1, q_heads = 4, kv_heads = 2, q_len = 2, kv_len = 6, depth = 3, v_depth = 5;
  OwnedTensor<float> query{ScalarType::Float, {1}};
  OwnedTensor<float> key{ScalarType::Float, {1}};
  OwnedTensor<float> value{ScalarType::Float, {1}};
  void Fill() {
    query = OwnedTensor<float>(ScalarType::Float, {batch, q_heads, q_len, depth},
                               Ramp(batch * q_heads * q_len * depth, 0.37f, 0.1f));
    key = OwnedTensor<float>(ScalarType::Float, {batch, kv_heads, kv_len, depth},
                             Ramp(batch * kv_heads * kv_len * depth, 0.71f, 0.3f));
    value = OwnedTensor<float>(ScalarType::Float, {batch, kv_heads, kv_len, v_depth},
                               Ramp(batch * kv_heads * kv_len * v_depth, 0.53f, 0.7f));
  }
};

// A filled problem of these sizes (batch 1, value rows as wide as key rows).
Problem Shaped(int q_heads, int kv_heads, int q_len, int kv_len, int depth) {
  Problem p;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.depth = p.v_depth = depth;
  p.Fill();
  return p;
}

// softmax over all positions with mask(b, h, t, s) added (-inf = excluded) then . v, with
// query head h reading kv head h / (H_q / H_kv); a row with every score -inf gives zeros.
template <typename MaskFn>
std::vector<float> Reference(Problem& p, float scale, MaskFn mask) {
  std::vector<float> out(static_cast<size_t>(p.batch * p.q_heads * p.q_len * p.v_depth), 0.0f);
  const int group = p.q_heads / p.kv_heads;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.q_heads; ++h)
      for (int t = 0; t < p.q_len; ++t) {
        const int kv = b * p.kv_heads + h / group;
        std::vector<double> scores(p.kv_len);
        double best = -INFINITY;
        for (int s = 0; s < p.kv_len; ++s) {
          double dot = 0;
          for (int e = 0; e < p.depth; ++e)
            dot += p.query.data()[((b * p.q_heads + h) * p.q_len + t) * p.depth + e] *
                   p.key.data()[(kv * p.kv_len + s) * p.depth + e];
          scores[s] = dot * scale + mask(b, h, t, s);
          best = std::max(best, scores[s]);
        }
        if (std::isinf(best)) continue;  // fully masked: zeros
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - best));
        for (int s = 0; s < p.kv_len; ++s)
          for (int e = 0; e < p.v_depth; ++e)
            out[((b * p.q_heads + h) * p.q_len + t) * p.v_depth + e] += static_cast<float>(
                scores[s] / sum * p.value.data()[(kv * p.kv_len + s) * p.v_depth + e]);
      }
  return out;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-5) << what << " at " << i;
  }
}

// Runs the kernel; returns the output and the positions it read.
std::vector<float> RunKernel(Problem& p, const std::optional<executorch::aten::Tensor>& mask,
                             bool causal, float scale, uint64_t* read = nullptr) {
  OwnedTensor<float> out(ScalarType::Float, {p.batch, p.q_heads, p.q_len, p.v_depth});
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext ctx;
  const uint64_t before = GqaAttentionPositionsRead();
  GqaAttentionOut(ctx, p.query.tensor(), p.key.tensor(), p.value.tensor(), mask, causal, scale,
                  out_t);
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  if (read != nullptr) *read = GqaAttentionPositionsRead() - before;
  return out.data();
}

TEST(GqaAttentionTest, GroupedHeadsWithoutMaskReadEveryPosition) {
  Problem p;
  p.Fill();
  uint64_t read = 0;
  const std::vector<float> out = RunKernel(p, std::nullopt, false, 0.5f, &read);
  ExpectNear(out, Reference(p, 0.5f, [](int, int, int, int) { return 0.0; }), "no mask");
  EXPECT_EQ(read, static_cast<uint64_t>(p.q_heads * p.q_len * p.kv_len));
  EXPECT_EQ(executorch_trt_gqa_attention_positions_read(), GqaAttentionPositionsRead());
}

TEST(GqaAttentionTest, BoolMaskOfFilledPositionsSkipsTheRest) {
  // The decode mask: [1, 1, 1, S], positions 0..2 filled out of a capacity of 40.
  Problem p;
  p.q_len = 1;
  p.kv_len = 40;
  p.Fill();
  OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, 1, 1, p.kv_len});
  for (int s = 0; s < 3; ++s) mask.data()[s] = 1;
  uint64_t read = 0;
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.3f, &read);
  ExpectNear(out, Reference(p, 0.3f, [](int, int, int, int s) { return s < 3 ? 0.0 : -INFINITY; }),
             "filled prefix");
  EXPECT_EQ(read, static_cast<uint64_t>(p.q_heads * 3)) << "only the filled positions are read";
}

TEST(GqaAttentionTest, WindowWithAHoleAndPerHeadMask) {
  // A [1, H_q, T, S] bool mask: a window starting past position 8 (the word skip), a hole
  // inside it, and a different window per head.
  Problem p;
  p.q_len = 2;
  p.kv_len = 24;
  p.Fill();
  auto allowed = [](int, int h, int t, int s) {
    return s >= 9 + h && s <= 14 + h + t && s != 11 + h;
  };
  OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, p.q_heads, p.q_len, p.kv_len});
  int expected_read = 0;
  for (int h = 0; h < p.q_heads; ++h)
    for (int t = 0; t < p.q_len; ++t)
      for (int s = 0; s < p.kv_len; ++s) {
        const bool a = allowed(0, h, t, s);
        mask.data()[(h * p.q_len + t) * p.kv_len + s] = a;
        expected_read += a;
      }
  uint64_t read = 0;
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.4f, &read);
  ExpectNear(
      out,
      Reference(p, 0.4f,
                [&](int b, int h, int t, int s) { return allowed(b, h, t, s) ? 0.0 : -INFINITY; }),
      "window");
  EXPECT_EQ(read, static_cast<uint64_t>(expected_read));
}

TEST(GqaAttentionTest, FloatMaskIsAddedAndMinusInfinitySkipped) {
  Problem p;
  p.batch = 2;
  p.Fill();
  // [B, 1, T, S]: a bias per position, -inf on the last two for batch 1.
  OwnedTensor<float> mask(ScalarType::Float, {p.batch, 1, p.q_len, p.kv_len});
  auto bias = [&](int b, int, int t, int s) -> double {
    return (b == 1 && s >= p.kv_len - 2) ? -INFINITY : 0.25 * s - 0.5 * t;
  };
  for (int b = 0; b < p.batch; ++b)
    for (int t = 0; t < p.q_len; ++t)
      for (int s = 0; s < p.kv_len; ++s)
        mask.data()[(b * p.q_len + t) * p.kv_len + s] = static_cast<float>(bias(b, 0, t, s));
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.6f);
  ExpectNear(out, Reference(p, 0.6f, bias), "float mask");
}

TEST(GqaAttentionTest, RankTwoMaskBroadcasts) {
  Problem p;
  p.Fill();
  OwnedTensor<uint8_t> mask(ScalarType::Bool, {p.q_len, p.kv_len});
  for (int t = 0; t < p.q_len; ++t)
    for (int s = 0; s < p.kv_len; ++s) mask.data()[t * p.kv_len + s] = (s + t) % 3 != 0;
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.5f);
  ExpectNear(
      out,
      Reference(p, 0.5f, [](int, int, int t, int s) { return (s + t) % 3 != 0 ? 0.0 : -INFINITY; }),
      "rank-2 mask");
}

TEST(GqaAttentionTest, CausalIsTopLeftAligned) {
  Problem p;
  p.q_len = 3;
  p.kv_len = 5;
  p.Fill();
  uint64_t read = 0;
  const std::vector<float> out = RunKernel(p, std::nullopt, true, 0.5f, &read);
  ExpectNear(out,
             Reference(p, 0.5f, [](int, int, int t, int s) { return s <= t ? 0.0 : -INFINITY; }),
             "causal");
  EXPECT_EQ(read, static_cast<uint64_t>(p.q_heads * (1 + 2 + 3)));
}

TEST(GqaAttentionTest, FullyMaskedRowIsZeros) {
  Problem p;
  p.Fill();
  OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, 1, p.q_len, p.kv_len});
  for (int s = 0; s < p.kv_len; ++s) mask.data()[p.kv_len + s] = 1;  // row 0 all false
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.5f);
  ExpectNear(out, Reference(p, 0.5f, [](int, int, int t, int) { return t == 1 ? 0.0 : -INFINITY; }),
             "fully masked row");
  EXPECT_EQ(out[0], 0.0f);
}

// Spans longer than the kernel's chunk (128 positions) are computed in chunks and combined;
// these cover several chunks per row, chunks a head's mask leaves empty, and maxima that
// differ by far more than exp's range between chunks.

TEST(GqaAttentionTest, LongDecodeSpanAcrossChunksEqualsOneSoftmax) {
  // A decode step over 600 filled positions of 700, three query heads per key/value head,
  // heads of 64 (the kernel's fixed-size build) and 67 (any size: vector loop and tail).
  for (int depth : {64, 67}) {
    Problem p = Shaped(6, 2, 1, 700, depth);
    OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, 1, 1, p.kv_len});
    for (int s = 0; s < 600; ++s) mask.data()[s] = 1;
    uint64_t read = 0;
    const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.125f, &read);
    ExpectNear(out,
               Reference(p, 0.125f, [](int, int, int, int s) { return s < 600 ? 0.0 : -INFINITY; }),
               "600 of 700 filled");
    EXPECT_EQ(read, static_cast<uint64_t>(p.q_heads * 600));
  }
}

TEST(GqaAttentionTest, PerHeadLongMasksWithEmptyChunksAndAnEmptyHead) {
  // One group of three heads over 900 positions: head 0 attends everything but a hole of 300
  // (whole chunks empty for it), head 1 only positions 700..709 (its group's other chunks are
  // empty for it), head 2 nothing (zeros, while its group-mates read).
  // Heads of 16 (any size) and of 64 (eight positions at a time).
  for (int depth : {16, 64}) {
    Problem p = Shaped(3, 1, 1, 900, depth);
    auto allowed = [](int, int h, int, int s) {
      if (h == 0) return s < 150 || s >= 450;
      if (h == 1) return s >= 700 && s < 710;
      return false;
    };
    OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, p.q_heads, 1, p.kv_len});
    int expected_read = 0;
    for (int h = 0; h < p.q_heads; ++h)
      for (int s = 0; s < p.kv_len; ++s) {
        mask.data()[h * p.kv_len + s] = allowed(0, h, 0, s);
        expected_read += allowed(0, h, 0, s);
      }
    uint64_t read = 0;
    const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.3f, &read);
    ExpectNear(out,
               Reference(p, 0.3f,
                         [&](int b, int h, int t, int s) {
                           return allowed(b, h, t, s) ? 0.0 : -INFINITY;
                         }),
               "per-head long masks");
    EXPECT_EQ(read, static_cast<uint64_t>(expected_read));
    for (int e = 0; e < p.v_depth; ++e) EXPECT_EQ(out[2 * p.v_depth + e], 0.0f) << e;
  }
}

TEST(GqaAttentionTest, ChunkMaximaFarApartAreRescaled) {
  // A float bias that puts one chunk's scores ~100 above the others: a combine that did not
  // rescale each chunk to the largest maximum would sum weights of e^100 with weights of 1.
  Problem p = Shaped(2, 1, 2, 520, 4);
  auto bias = [](int, int, int t, int s) -> double {
    if (s >= 300 && s < 310) return 100.0 - t;
    return s % 7 == 0 ? -INFINITY : 0.01 * s;
  };
  OwnedTensor<float> mask(ScalarType::Float, {1, 1, p.q_len, p.kv_len});
  for (int t = 0; t < p.q_len; ++t)
    for (int s = 0; s < p.kv_len; ++s)
      mask.data()[t * p.kv_len + s] = static_cast<float>(bias(0, 0, t, s));
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.5f);
  ExpectNear(out, Reference(p, 0.5f, bias), "far-apart maxima");
}

TEST(GqaAttentionTest, HeadsOf64MixBlocksOfEightWithSinglePositions) {
  // Heads of 64 score eight allowed positions at a time and the rest one by one: a per-head
  // float bias whose span starts and ends off a multiple of eight, with a -inf hole per head
  // (its block of eight goes position by position), over three query positions.
  Problem p = Shaped(6, 2, 3, 100, 64);
  auto bias = [](int, int h, int t, int s) -> double {
    if (s < 3 + h || s > 90 + t || s % 29 == 5 + h) return -INFINITY;
    return 0.02 * s - 0.1 * t + 0.3 * h;
  };
  OwnedTensor<float> mask(ScalarType::Float, {1, p.q_heads, p.q_len, p.kv_len});
  int expected_read = 0;
  for (int h = 0; h < p.q_heads; ++h)
    for (int t = 0; t < p.q_len; ++t)
      for (int s = 0; s < p.kv_len; ++s) {
        const double b = bias(0, h, t, s);
        mask.data()[(h * p.q_len + t) * p.kv_len + s] = static_cast<float>(b);
        expected_read += !std::isinf(b);
      }
  uint64_t read = 0;
  const std::vector<float> out = RunKernel(p, mask.tensor(), false, 0.2f, &read);
  ExpectNear(out, Reference(p, 0.2f, bias), "blocks and single positions");
  EXPECT_EQ(read, static_cast<uint64_t>(expected_read));
}

TEST(GqaAttentionTest, LongCausalPrefillAcrossChunks) {
  // A 300-token causal prompt: rows span 1..300 positions (one to three chunks); heads of 8
  // (any size) and of 64 (the kernel's fixed-size build).
  for (int depth : {8, 64}) {
    Problem p = Shaped(4, 2, 300, 300, depth);
    uint64_t read = 0;
    const std::vector<float> out = RunKernel(p, std::nullopt, true, 0.4f, &read);
    ExpectNear(out,
               Reference(p, 0.4f, [](int, int, int t, int s) { return s <= t ? 0.0 : -INFINITY; }),
               "long causal");
    EXPECT_EQ(read, static_cast<uint64_t>(p.q_heads * 300 * 301 / 2));
  }
}

TEST(GqaAttentionTest, WeightsAreExpOfScoreMinusMaxToAFewUlp) {
  // One query row whose scores are chosen (q = e0, key row s = scores[s] * e0, scale 1) and
  // value rows that are rows of the identity: output[s] is the softmax weight of position s,
  // checked to a relative 2e-6 against double exp (the 1e-5 absolute of the other tests would
  // pass a rough exp). Scores from 0 to -100: e^x below float's normal range (-87.33) may be
  // 0. 64 positions (whole groups of eight) and 61 (a tail), heads of 64 and of 8.
  for (int depth : {64, 8}) {
    for (int kv_len : {64, 61}) {
      Problem p = Shaped(1, 1, 1, kv_len, depth);
      p.v_depth = 64;
      std::vector<double> scores(kv_len);
      for (int s = 0; s < kv_len; ++s) {
        scores[s] = s == 0 ? 0.0 : -100.0 * std::pow(static_cast<double>(s) / (kv_len - 1), 1.7);
      }
      scores[1] = -1e-3;
      scores[2] = -0.3466;  // near -ln 2 / 2, where the reduction's rounding turns over
      scores[3] = -87.0;
      std::vector<float> q(depth, 0.0f), k(static_cast<size_t>(kv_len) * depth, 0.0f);
      std::vector<float> v(static_cast<size_t>(kv_len) * 64, 0.0f);
      q[0] = 1.0f;
      for (int s = 0; s < kv_len; ++s) {
        k[s * depth] = static_cast<float>(scores[s]);
        v[s * 64 + s] = 1.0f;
      }
      p.query = OwnedTensor<float>(ScalarType::Float, {1, 1, 1, depth}, q);
      p.key = OwnedTensor<float>(ScalarType::Float, {1, 1, kv_len, depth}, k);
      p.value = OwnedTensor<float>(ScalarType::Float, {1, 1, kv_len, 64}, v);
      const std::vector<float> out = RunKernel(p, std::nullopt, false, 1.0f);
      double sum = 0;
      for (int s = 0; s < kv_len; ++s)
        sum += std::exp(static_cast<double>(static_cast<float>(scores[s])));
      for (int s = 0; s < kv_len; ++s) {
        const double want = std::exp(static_cast<double>(static_cast<float>(scores[s]))) / sum;
        const double tolerance = scores[s] < -87.33 ? 1.2e-38 : 2e-6 * want;
        EXPECT_NEAR(out[s], want, tolerance) << "score " << scores[s] << " (position " << s
                                             << ", kv_len " << kv_len << ", depth " << depth << ")";
      }
      for (int e = kv_len; e < 64; ++e) EXPECT_EQ(out[e], 0.0f) << "column " << e;
    }
  }
}

// This binary runs twice (tests/cpp/BUILD): as the CPU allows, and with the baseline build
// asked for through the environment, so both builds pass every test above.
TEST(GqaAttentionTest, RunsTheBuildTheEnvironmentAsksFor) {
  const char* asked = std::getenv(kGqaAttentionBuildVariable);
  if (asked != nullptr && std::string(asked) == "baseline") {
    EXPECT_STREQ(GqaAttentionBuild(), "baseline");
    return;
  }
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  EXPECT_STREQ(GqaAttentionBuild(), avx2 ? "avx2" : "baseline");
#else
  EXPECT_STREQ(GqaAttentionBuild(), "baseline");
#endif
}

TEST(GqaAttentionTest, RejectsBadInputsWithoutWriting) {
  struct Case {
    const char* what;
    std::vector<int32_t> key_sizes;
    std::vector<int32_t> mask_sizes;  // empty: no mask
    bool causal;
  };
  for (const Case& c : {Case{"key rank 3", {1, 2, 6}, {}, false},
                        Case{"heads do not divide", {1, 3, 6, 3}, {}, false},
                        Case{"key depth", {1, 2, 6, 4}, {}, false},
                        Case{"mask does not broadcast", {1, 2, 6, 3}, {1, 1, 2, 5}, false},
                        Case{"mask rank 5", {1, 2, 6, 3}, {1, 1, 1, 2, 6}, false},
                        Case{"causal with a mask", {1, 2, 6, 3}, {1, 1, 2, 6}, true}}) {
    Problem p;
    p.Fill();
    OwnedTensor<float> key(ScalarType::Float, c.key_sizes);
    OwnedTensor<float> mask(ScalarType::Float,
                            c.mask_sizes.empty() ? std::vector<int32_t>{1} : c.mask_sizes);
    OwnedTensor<float> out(ScalarType::Float, {1, 4, 2, 5}, std::vector<float>(40, 7.0f));
    executorch::aten::Tensor out_t = out.tensor();
    std::optional<executorch::aten::Tensor> mask_arg;
    if (!c.mask_sizes.empty()) mask_arg = mask.tensor();
    KernelRuntimeContext ctx;
    GqaAttentionOut(ctx, p.query.tensor(), key.tensor(), p.value.tensor(), mask_arg, c.causal, 0.5,
                    out_t);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument) << c.what;
    EXPECT_EQ(out.data(), std::vector<float>(40, 7.0f)) << c.what;
  }
  Problem p;
  p.Fill();
  OwnedTensor<double> query64(ScalarType::Double, {1, 4, 2, 3});
  OwnedTensor<int32_t> int_mask(ScalarType::Int, {1, 1, 2, 6});
  OwnedTensor<float> out(ScalarType::Float, {1, 4, 2, 5}, std::vector<float>(40, 7.0f));
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext dtype_ctx;
  GqaAttentionOut(dtype_ctx, query64.tensor(), p.key.tensor(), p.value.tensor(), std::nullopt,
                  false, 0.5, out_t);
  EXPECT_EQ(dtype_ctx.failure_state(), Error::InvalidArgument);
  KernelRuntimeContext mask_ctx;
  GqaAttentionOut(mask_ctx, p.query.tensor(), p.key.tensor(), p.value.tensor(), int_mask.tensor(),
                  false, 0.5, out_t);
  EXPECT_EQ(mask_ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(out.data(), std::vector<float>(40, 7.0f));
}

TEST(GqaAttentionTest, RegisteredBoxedKernelRuns) {
  Problem p;
  p.Fill();
  OwnedTensor<float> out(ScalarType::Float, {1, 4, 2, 5});
  EValue query(p.query.tensor()), key(p.key.tensor()), value(p.value.tensor()), mask;
  EValue causal(false), scale(0.5), out_v(out.tensor()), ret(out.tensor());
  std::vector<EValue*> stack = {&query, &key, &value, &mask, &causal, &scale, &out_v, &ret};
  auto fn = executorch::runtime::get_op_function_from_registry(kGqaAttentionOutOpName);
  ASSERT_TRUE(fn.ok());
  KernelRuntimeContext ctx;
  (*fn.get())(ctx, executorch::runtime::Span<EValue*>(stack.data(), stack.size()));
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  ExpectNear(out.data(), Reference(p, 0.5f, [](int, int, int, int) { return 0.0; }), "boxed");
}

}  // namespace
}  // namespace executorch_trt
