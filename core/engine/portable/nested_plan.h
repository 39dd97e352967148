// Copyright (c) executorch-trt authors.
//
// nested_plan.h: the execution plan CheckNestedProgram (nested_program_checks.h) checks, the
// helpers every check shares, and the checks themselves, in the order it runs them. Internal to
// nested_program_checks; each check is defined in its own file:
//   CheckNames             name_checks.cpp            strings that are logged
//   CheckValues            value_checks.cpp           the value table (tensors, lists)
//   CheckPlannedBuffers    planned_buffer_checks.cpp  planned buffer sizes
//   CheckChain             instruction_checks.cpp     every instruction of a chain
//   CheckUnplannedTensors  unplanned_tensor_checks.cpp tensors ExecuTorch gives no data
// Each returns Error::Ok, or Error::InvalidProgram after one ET_LOG line naming the method, the
// instruction, value or buffer index and the bad value. None reads outside the verified
// flatbuffer; all are thread-safe (they keep no state beyond their arguments).

#pragma once

// Before the hidden region below: flatbuffers' asserts must bind to the C library's
// __assert_fail, whose declaration would otherwise be hidden too (an undefined hidden symbol).
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <executorch/runtime/core/error.h>

// libexecutorch.so exports the inline functions of its own FlatBuffers release and of its own
// code generated from this schema under the same names as ours; hidden, each side binds to its
// own (as in examples/plan_copies.cpp). What follows is hidden too: it holds those types and is
// internal to the library.
#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"

namespace executorch_trt::nested_plan {

namespace fb = executorch_flatbuffer;
using executorch::runtime::Error;

// The end of every log line of these checks.
inline constexpr const char* kCorrupt = "the nested program is corrupt; re-export";

// The number of elements of an optional flatbuffer vector (0 when absent).
template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// One execution plan of a verified program, named `method` in log lines. Borrows both.
class NestedPlan {
 public:
  NestedPlan(const fb::ExecutionPlan& plan, const char* method)
      : plan_(plan), method_(method), num_values_(Size(plan.values())) {}

  const fb::ExecutionPlan& plan() const { return plan_; }
  const char* method() const { return method_; }
  int64_t num_values() const { return num_values_; }

  // Logs "nested method '<method>': <what> (index <index>, value <value>); <kCorrupt>." and
  // returns Error::InvalidProgram.
  Error Fail(const char* what, int64_t index, int64_t value) const;

  // Whether `index` names a value of the plan.
  bool IsValue(int64_t index) const { return index >= 0 && index < num_values_; }

  // The type of value `index` (IsValue(index) must hold).
  fb::KernelTypes Type(int64_t index) const {
    return plan_.values()->Get(static_cast<uint32_t>(index))->val_type();
  }

  // Fail(what, i, indices[i]) for the first entry of `indices` that is not a value.
  Error CheckIndices(const flatbuffers::Vector<int32_t>* indices, const char* what) const;

  // Whether value `v` is a method input or output (the engine binds their data).
  bool IsBound(uint32_t v) const;

 private:
  const fb::ExecutionPlan& plan_;
  const char* method_;
  const int64_t num_values_;
};

// What CheckValues learns about the values, for the checks after it.
struct ValueFacts {
  std::vector<uint64_t> extents;    // by planned buffer id: end of the last tensor in it
  std::vector<uint32_t> unplanned;  // non-empty tensors ExecuTorch gives no data
};

// The method, operator, overload and delegate names are valid UTF-8 without control characters.
Error CheckNames(const NestedPlan& plan);

// Every value: list items in range and of their list's type, tensors with a known dtype, sizes
// whose strides fit int32, a dim order of their rank and a planned extent that does not
// overflow. Fills *facts.
Error CheckValues(const NestedPlan& plan, ValueFacts* facts);

// Every planned buffer (ids >= 1) is no larger than the extent of the tensors planned in it
// (`extents`, from CheckValues) rounded up to kNestedPlannedBufferSlack.
Error CheckPlannedBuffers(const NestedPlan& plan, const std::vector<uint64_t>& extents);

// Every instruction of chain `c`: indices in range, a known argument type, kernel calls that
// match their operator's schema (operator_schemas.h), delegate call arguments and freed values
// that are tensors, moves that keep a value's type. Logs the chain and instruction on failure.
Error CheckChain(const NestedPlan& plan, const fb::Chain& chain, uint32_t c);

// Every tensor of `unplanned` (from CheckValues) is given data by a MoveCall or an et_view on
// every path through the method before any instruction reads it.
Error CheckUnplannedTensors(const NestedPlan& plan, const std::vector<uint32_t>& unplanned);

}  // namespace executorch_trt::nested_plan

#pragma GCC visibility pop
