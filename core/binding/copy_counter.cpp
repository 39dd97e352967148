// Copyright (c) executorch-trt authors.

#include "core/binding/copy_counter.h"

#include <atomic>

namespace executorch_trt {
namespace {

std::atomic<uint64_t>& Counter() {
  static std::atomic<uint64_t> counter{0};
  return counter;
}

}  // namespace

void AddBytesCopied(uint64_t nbytes) { Counter().fetch_add(nbytes, std::memory_order_relaxed); }

uint64_t BytesCopied() { return Counter().load(std::memory_order_relaxed); }

}  // namespace executorch_trt

extern "C" __attribute__((visibility("default"))) uint64_t executorch_trt_bytes_copied(void) {
  return executorch_trt::BytesCopied();
}
