// Copyright (c) executorch-trt authors.
//
// The attention of one decode step, alone: executorch_trt::gqa_attention.out (the kernel the
// portable engine's nested program runs for a decoder's attention over its caches) called once
// per layer of a SmolLM-135M-shaped model (30 layers, 9 query heads over 3 KV heads of 64), one
// query position, a bool mask of the filled positions, each layer its own caches. Prints the
// median and p10 ms of the 30 calls per step, 200 steps after 5 untimed, at 64 / half /
// capacity - 64 positions filled, for caches of 512 and 2048 positions, on ExecuTorch's
// threadpool (its default thread count), in the kernel's build for this CPU
// (EXECUTORCH_TRT_GQA_ATTENTION_BUILD=baseline for the baseline one). Then the same for a prefill's
// attention: a prompt of 64 and of 512 tokens at positions 0.. (a causal bool mask [1, 1, T,
// capacity]), 20 prefills.
//
//   ./bazelw run //benchmarks:attention_step

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/kernels/gqa_attention.h"

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::extension::make_tensor_ptr;
using executorch::extension::TensorPtr;

constexpr int kLayers = 30, kQueryHeads = 9, kKvHeads = 3, kDepth = 64;
constexpr int kUntimed = 5, kSteps = 200, kPrefills = 20;

// `n` values of a smooth pattern (attention weights neither uniform nor one-hot).
std::vector<float> Pattern(size_t n, float scale, float offset) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = std::sin(scale * static_cast<float>(i) + offset);
  }
  return values;
}

// Median and p10 ms of one step (kLayers calls) over `filled` of `capacity` positions, for
// `prompt` query positions: the last `prompt` of the filled ones, each allowed the positions up
// to its own (1 = a decode step).
bool TimeSteps(int capacity, int filled, int prompt, int steps, double* median, double* p10) {
  const size_t cache_numel = static_cast<size_t>(kKvHeads) * capacity * kDepth;
  std::vector<TensorPtr> keys, values;
  for (int l = 0; l < kLayers; ++l) {
    const float layer = static_cast<float>(l);
    keys.push_back(
        make_tensor_ptr({1, kKvHeads, capacity, kDepth}, Pattern(cache_numel, 0.1f, layer)));
    values.push_back(make_tensor_ptr({1, kKvHeads, capacity, kDepth},
                                     Pattern(cache_numel, 0.07f, layer + 0.5f)));
  }
  const size_t rows_numel = static_cast<size_t>(kQueryHeads) * prompt * kDepth;
  TensorPtr query =
      make_tensor_ptr({1, kQueryHeads, prompt, kDepth}, Pattern(rows_numel, 0.3f, 0.0f));
  TensorPtr out =
      make_tensor_ptr({1, kQueryHeads, prompt, kDepth}, std::vector<float>(rows_numel, 0.0f));
  std::vector<uint8_t> allowed(static_cast<size_t>(prompt) * capacity, 0);
  for (int t = 0; t < prompt; ++t) {
    const int last = filled - prompt + t;  // the row's own position
    std::fill(allowed.begin() + static_cast<size_t>(t) * capacity,
              allowed.begin() + static_cast<size_t>(t) * capacity + last + 1, 1);
  }
  TensorPtr mask = make_tensor_ptr({1, 1, prompt, capacity}, std::move(allowed), ScalarType::Bool);
  const std::optional<Tensor> mask_arg = *mask;
  std::vector<double> times;
  for (int step = 0; step < kUntimed + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    for (int l = 0; l < kLayers; ++l) {
      executorch::runtime::KernelRuntimeContext context;
      executorch_trt::GqaAttentionOut(context, *query, *keys[l], *values[l], mask_arg,
                                      /*is_causal=*/false,
                                      1.0 / std::sqrt(static_cast<double>(kDepth)), *out);
      if (context.failure_state() != executorch::runtime::Error::Ok) {
        std::fprintf(stderr, "attention_step: gqa_attention failed at layer %d\n", l);
        return false;
      }
    }
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    if (step >= kUntimed) times.push_back(elapsed.count());
  }
  std::sort(times.begin(), times.end());
  *median = times[times.size() / 2];
  *p10 = times[times.size() / 10];
  return true;
}

}  // namespace

int main() {
  executorch::runtime::runtime_init();
  std::printf(
      "gqa_attention (%s build), %d layers x %d query heads over %d KV heads of %d, one position\n",
      executorch_trt::GqaAttentionBuild(), kLayers, kQueryHeads, kKvHeads, kDepth);
  std::printf("%-10s %-8s %-12s %-10s\n", "capacity", "filled", "median ms", "p10 ms");
  for (int capacity : {512, 2048}) {
    for (int filled : {64, capacity / 2, capacity - 64}) {
      double median = 0, p10 = 0;
      if (!TimeSteps(capacity, filled, 1, kSteps, &median, &p10)) return 1;
      std::printf("%-10d %-8d %-12.3f %-10.3f\n", capacity, filled, median, p10);
    }
  }
  std::printf("prefill: the prompt's query positions from position 0, causal\n");
  std::printf("%-10s %-8s %-12s %-10s\n", "capacity", "prompt", "median ms", "p10 ms");
  for (int capacity : {512, 2048}) {
    for (int prompt : {64, 512}) {
      double median = 0, p10 = 0;
      if (!TimeSteps(capacity, prompt, prompt, kPrefills, &median, &p10)) return 1;
      std::printf("%-10d %-8d %-12.3f %-10.3f\n", capacity, prompt, median, p10);
    }
  }
  return 0;
}
