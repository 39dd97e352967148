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
#include <memory>
#include <optional>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/kernels/gqa_attention.h"

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;

constexpr int kLayers = 30, kQueryHeads = 9, kKvHeads = 3, kDepth = 64;
constexpr int kUntimed = 5, kSteps = 200;

// A contiguous tensor owning its values.
template <typename T>
class OwnedTensor {
 public:
  OwnedTensor(ScalarType dtype, std::vector<int32_t> sizes)
      : sizes_(std::move(sizes)), strides_(sizes_.size(), 1), dim_order_(sizes_.size()) {
    size_t numel = 1;
    for (int32_t s : sizes_) numel *= static_cast<size_t>(s);
    data_.resize(numel);
    for (size_t i = sizes_.size(); i > 1; --i) strides_[i - 2] = strides_[i - 1] * sizes_[i - 1];
    for (size_t i = 0; i < sizes_.size(); ++i) dim_order_[i] = static_cast<uint8_t>(i);
    impl_ = std::make_unique<executorch::runtime::etensor::TensorImpl>(
        dtype, static_cast<ssize_t>(sizes_.size()), sizes_.data(), data_.data(), dim_order_.data(),
        strides_.data());
  }
  Tensor tensor() { return Tensor(impl_.get()); }
  std::vector<T>& data() { return data_; }

 private:
  std::vector<int32_t> sizes_, strides_;
  std::vector<uint8_t> dim_order_;
  std::vector<T> data_;
  std::unique_ptr<executorch::runtime::etensor::TensorImpl> impl_;
};

// Fills `values` with a smooth pattern (attention weights neither uniform nor one-hot).
void Fill(std::vector<float>& values, float scale, float offset) {
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(scale * static_cast<float>(i) + offset);
  }
}

// Median and p10 ms of one step (kLayers calls) with `filled` of `capacity` positions allowed.
bool TimeSteps(int capacity, int filled, double* median, double* p10) {
  std::vector<OwnedTensor<float>> keys, values;
  for (int l = 0; l < kLayers; ++l) {
    keys.emplace_back(ScalarType::Float, std::vector<int32_t>{1, kKvHeads, capacity, kDepth});
    values.emplace_back(ScalarType::Float, std::vector<int32_t>{1, kKvHeads, capacity, kDepth});
    Fill(keys.back().data(), 0.1f, static_cast<float>(l));
    Fill(values.back().data(), 0.07f, static_cast<float>(l) + 0.5f);
  }
  OwnedTensor<float> query(ScalarType::Float, {1, kQueryHeads, 1, kDepth});
  Fill(query.data(), 0.3f, 0.0f);
  OwnedTensor<float> out(ScalarType::Float, {1, kQueryHeads, 1, kDepth});
  OwnedTensor<uint8_t> mask(ScalarType::Bool, {1, 1, 1, capacity});
  for (int s = 0; s < capacity; ++s) mask.data()[s] = s < filled ? 1 : 0;
  const std::optional<Tensor> mask_arg = mask.tensor();
  Tensor out_tensor = out.tensor();
  std::vector<double> times;
  for (int step = 0; step < kUntimed + kSteps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    for (int l = 0; l < kLayers; ++l) {
      executorch::runtime::KernelRuntimeContext context;
      executorch_trt::GqaAttentionOut(context, query.tensor(), keys[l].tensor(), values[l].tensor(),
                                      mask_arg, /*is_causal=*/false,
                                      1.0 / std::sqrt(static_cast<double>(kDepth)), out_tensor);
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
