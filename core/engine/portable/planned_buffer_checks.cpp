// Copyright (c) executorch-trt authors.
//
// planned_buffer_checks.cpp: CheckPlannedBuffers (nested_plan.h). The engine allocates every
// planned buffer at init, so a corrupt size must not make a small blob claim gigabytes.

#include <cstdint>

#include "core/engine/portable/nested_plan.h"
#include "core/engine/portable/nested_program_checks.h"

namespace executorch_trt::nested_plan {

Error CheckPlannedBuffers(const NestedPlan& plan, const std::vector<uint64_t>& extents) {
  // flatbuffers' verifier aligns a vector's length, not its 8-byte elements; a builder
  // always aligns them (and the buffer is aligned here), so a misaligned table is corrupt,
  // and reading it would be a misaligned load (UBSan).
  const auto* sizes = plan.plan().non_const_buffer_sizes();
  if (sizes != nullptr && reinterpret_cast<uintptr_t>(sizes->Data()) % alignof(int64_t) != 0) {
    return plan.Fail("the planned buffer sizes are misaligned", -1, 0);
  }
  // Buffer 0 is reserved (constants); the engine allocates buffers 1..n at init.
  for (uint32_t id = 1; id < extents.size(); ++id) {
    const int64_t size = sizes->Get(id);
    if (size < 0) return plan.Fail("a planned buffer has a negative size", id, size);
    if (static_cast<uint64_t>(size) > extents[id] + kNestedPlannedBufferSlack) {
      return plan.Fail("a planned buffer is larger than the tensors planned in it", id, size);
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::nested_plan
