// Copyright (c) executorch-trt authors.
//
// nested_plan.cpp: NestedPlan's shared helpers (see nested_plan.h).

#include "core/engine/portable/nested_plan.h"

#include <cinttypes>

#include <executorch/runtime/platform/log.h>

namespace executorch_trt::nested_plan {

Error NestedPlan::Fail(const char* what, int64_t index, int64_t value) const {
  ET_LOG(Error,
         "executorch_trt: nested method '%s': %s (index %" PRId64 ", value %" PRId64 "); %s.",
         method_, what, index, value, kCorrupt);
  return Error::InvalidProgram;
}

Error NestedPlan::CheckIndices(const flatbuffers::Vector<int32_t>* indices,
                               const char* what) const {
  for (uint32_t i = 0; i < Size(indices); ++i) {
    if (!IsValue(indices->Get(i))) return Fail(what, i, indices->Get(i));
  }
  return Error::Ok;
}

bool NestedPlan::IsBound(uint32_t v) const {
  for (const auto* list : {plan_.inputs(), plan_.outputs()}) {
    for (uint32_t i = 0; i < Size(list); ++i) {
      if (list->Get(i) == static_cast<int32_t>(v)) return true;
    }
  }
  return false;
}

}  // namespace executorch_trt::nested_plan
