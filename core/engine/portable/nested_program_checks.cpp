// Copyright (c) executorch-trt authors.
//
// nested_program_checks.cpp: see nested_program_checks.h. The program flatbuffer is read with
// the C++ code flatc generates from ExecuTorch's own schema (//core/schema:program_schema),
// after flatbuffers::Verifier has checked every offset, length and alignment in it; the checks
// of its execution plan are nested_plan.h's, one file each.

#include "core/engine/portable/nested_program_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include <executorch/runtime/platform/log.h>

#include "core/engine/portable/nested_plan.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using nested_plan::kCorrupt;
using nested_plan::NestedPlan;
using nested_plan::Size;
using nested_plan::fb::ExecutionPlan;

// Runs the plan's checks in order; each later check relies on the earlier ones (indices in
// range, names clean, facts about the values).
Error CheckPlan(const ExecutionPlan& execution_plan, const char* method) {
  const NestedPlan plan(execution_plan, method);
  if (execution_plan.values() == nullptr) return plan.Fail("has no value table", -1, 0);
  Error err = plan.CheckIndices(execution_plan.inputs(), "method input");
  if (err == Error::Ok) err = plan.CheckIndices(execution_plan.outputs(), "method output");
  if (err == Error::Ok) err = nested_plan::CheckNames(plan);
  nested_plan::ValueFacts facts;
  if (err == Error::Ok) err = nested_plan::CheckValues(plan, &facts);
  if (err == Error::Ok) err = nested_plan::CheckPlannedBuffers(plan, facts.extents);
  for (uint32_t c = 0; err == Error::Ok && c < Size(execution_plan.chains()); ++c) {
    err = nested_plan::CheckChain(plan, *execution_plan.chains()->Get(c), c);
  }
  if (err == Error::Ok) err = nested_plan::CheckUnplannedTensors(plan, facts.unplanned);
  return err;
}

}  // namespace

Error CheckNestedProgram(const void* data, size_t size, const char* method_name) {
  namespace fb = nested_plan::fb;
  if (data == nullptr || size < 8) {
    ET_LOG(Error, "executorch_trt: the nested program is %zu bytes; %s.", size, kCorrupt);
    return Error::InvalidProgram;
  }
  // A flatbuffer cannot reach past this (the verifier asserts a smaller buffer): what follows
  // it, e.g. segments, is never part of the program table.
  size = std::min<size_t>(size, FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  // The verifier and the accessors load scalars in place: give them an aligned buffer.
  std::unique_ptr<std::max_align_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(data) % alignof(std::max_align_t) != 0) {
    aligned.reset(
        new (std::nothrow)
            std::max_align_t[(size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
    if (aligned == nullptr) return Error::MemoryAllocationFailed;
    std::memcpy(aligned.get(), data, size);
    data = aligned.get();
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  flatbuffers::Verifier verifier(bytes, size);
  if (!flatbuffers::BufferHasIdentifier(bytes, fb::ProgramIdentifier()) ||
      !fb::VerifyProgramBuffer(verifier)) {
    ET_LOG(Error, "executorch_trt: the nested program fails flatbuffer verification; %s.",
           kCorrupt);
    return Error::InvalidProgram;
  }
  const fb::Program* program = fb::GetProgram(bytes);
  for (uint32_t i = 0; i < Size(program->execution_plan()); ++i) {
    const ExecutionPlan* plan = program->execution_plan()->Get(i);
    if (plan->name() != nullptr && plan->name()->str() == method_name) {
      return CheckPlan(*plan, method_name);
    }
  }
  ET_LOG(Error, "executorch_trt: the nested program has no method '%s'; %s.", method_name,
         kCorrupt);
  return Error::InvalidProgram;
}

}  // namespace executorch_trt
