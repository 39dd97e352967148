// Copyright (c) executorch-trt authors.
//
// The attention of one decode step, alone: executorch_trt::gqa_attention.out (the kernel the
// portable engine's nested program runs for a decoder's attention over its caches) called once
// per layer of a SmolLM-135M-shaped model (30 layers, 9 query heads over 3 KV heads of 64), one
// query position, a bool mask of the filled positions, each layer its own caches. Prints the
// median and p10 ms of the 30 calls per step, 200 steps after 5 untimed, at 64 / half /
// capacity - 64 positions filled, for caches of 512 and 2048 positions, on ExecuTorch's
// threadpool (its default thread count).
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
constexpr int kUntimed = 5, kSteps = 200;

// `n` values of a smooth pattern (attention weights neither uniform nor one-hot).
std::vector<float> Pattern(size_t n, float scale, float offset) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = std::sin(scale * static_cast<float>(i) + offset);
  }
  return values;
}

// Median and p10 ms of one step (kLayers calls) with `filled` of `capacity` positions allowed.
bool TimeSteps(int capacity, int filled, double* median, double* p10) {
  const size_t cache_numel = static_cast<size_t>(kKvHeads) * capacity * kDepth;
  std::vector<TensorPtr> keys, values;
  for (int l = 0; l < kLayers; ++l) {
    const float layer = static_cast<float>(l);
    keys.push_back(
        make_tensor_ptr({1, kKvHeads, capacity, kDepth}, Pattern(cache_numel, 0.1f, layer)));
    values.push_back(make_tensor_ptr({1, kKvHeads, capacity, kDepth},
                                     Pattern(cache_numel, 0.07f, layer + 0.5f)));
  }
  TensorPtr query =
      make_tensor_ptr({1, kQueryHeads, 1, kDepth}, Pattern(kQueryHeads * kDepth, 0.3f, 0.0f));
  TensorPtr out =
      make_tensor_ptr({1, kQueryHeads, 1, kDepth}, std::vector<float>(kQueryHeads * kDepth, 0.0f));
  std::vector<uint8_t> filled_positions(capacity, 0);
  std::fill(filled_positions.begin(), filled_positions.begin() + filled, 1);
  TensorPtr mask =
      make_tensor_ptr({1, 1, 1, capacity}, std::move(filled_positions), ScalarType::Bool);
  const std::optional<Tensor> mask_arg = *mask;
  std::vector<double> times;
  for (int step = 0; step < kUntimed + kSteps; ++step) {
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
  std::printf("gqa_attention, %d layers x %d query heads over %d KV heads of %d, one position\n",
              kLayers, kQueryHeads, kKvHeads, kDepth);
  std::printf("%-10s %-8s %-12s %-10s\n", "capacity", "filled", "median ms", "p10 ms");
  for (int capacity : {512, 2048}) {
    for (int filled : {64, capacity / 2, capacity - 64}) {
      double median = 0, p10 = 0;
      if (!TimeSteps(capacity, filled, &median, &p10)) return 1;
      std::printf("%-10d %-8d %-12.3f %-10.3f\n", capacity, filled, median, p10);
    }
  }
  return 0;
}
