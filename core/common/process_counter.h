// Copyright (c) executorch-trt authors.
//
// process_counter.h: a process-wide count of events the delegate keeps for its tests, runners
// and benchmarks (bytes copied into separate outputs, cross-attention cache writes, cache
// positions read), each read through a C function for ctypes.

#pragma once

#include <atomic>
#include <cstdint>

namespace executorch_trt {

// A monotonic uint64 count. Define one at namespace scope: the constexpr constructor makes it
// constant-initialized, so a kernel or backend may count from any static initializer.
// Thread-safe (relaxed atomics: a count, not a synchronization point). Not copyable.
class ProcessCounter {
 public:
  constexpr ProcessCounter() = default;
  ProcessCounter(const ProcessCounter&) = delete;
  ProcessCounter& operator=(const ProcessCounter&) = delete;

  void Add(uint64_t n) { count_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Read() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> count_{0};
};

}  // namespace executorch_trt
