// Copyright (c) executorch-trt authors.

#include "core/binding/copy_counter.h"

#include "core/common/process_counter.h"

namespace executorch_trt {
namespace {

ProcessCounter bytes_copied;

}  // namespace

void AddBytesCopied(uint64_t nbytes) { bytes_copied.Add(nbytes); }

uint64_t BytesCopied() { return bytes_copied.Read(); }

}  // namespace executorch_trt

extern "C" __attribute__((visibility("default"))) uint64_t executorch_trt_bytes_copied(void) {
  return executorch_trt::BytesCopied();
}
