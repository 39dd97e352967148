// Copyright (c) executorch-trt authors.
//
// value_checks.cpp: CheckValues (nested_plan.h), one function per kind of value. ExecuTorch
// parses the values in order when it loads a method and reads list items with EValue
// accessors whose ET_CHECK aborts on another type.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "core/engine/portable/nested_plan.h"

namespace executorch_trt::nested_plan {
namespace {

// Bytes per element of `type`, or 0 if it is not one of ExecuTorch's scalar types.
size_t ElementSize(fb::ScalarType type) {
  switch (static_cast<executorch::aten::ScalarType>(type)) {
#define EXECUTORCH_TRT_ELEMENT_SIZE(ctype, name) \
  case executorch::aten::ScalarType::name:       \
    return sizeof(ctype);
    ET_FORALL_SCALAR_TYPES(EXECUTORCH_TRT_ELEMENT_SIZE)
#undef EXECUTORCH_TRT_ELEMENT_SIZE
    default:
      return 0;
  }
}

// BoxedEvalueList<int64_t> reads each item with EValue::toInt() (ET_CHECK) when a kernel asks
// for the list.
Error CheckIntList(const NestedPlan& plan, const fb::IntList& list, uint32_t v) {
  const auto* items = list.items();
  // As for the planned buffer sizes: the verifier does not align 8-byte elements.
  if (items != nullptr && reinterpret_cast<uintptr_t>(items->Data()) % alignof(int64_t) != 0) {
    return plan.Fail("an int list is misaligned", v, 0);
  }
  for (uint32_t i = 0; i < Size(items); ++i) {
    if (!plan.IsValue(items->Get(i))) return plan.Fail("int list item", v, items->Get(i));
    if (plan.Type(items->Get(i)) != fb::KernelTypes::Int) {
      return plan.Fail("an int list item is not an Int", v, items->Get(i));
    }
  }
  return Error::Ok;
}

// ExecuTorch's parseTensorList reads each item as a tensor while it parses the values in
// order: the items must be tensors parsed before the list.
Error CheckTensorList(const NestedPlan& plan, const fb::TensorList& list, uint32_t v) {
  const auto* items = list.items();
  Error err = plan.CheckIndices(items, "tensor list item");
  if (err != Error::Ok) return err;
  for (uint32_t i = 0; i < Size(items); ++i) {
    if (plan.Type(items->Get(i)) != fb::KernelTypes::Tensor ||
        static_cast<uint32_t>(items->Get(i)) >= v) {
      return plan.Fail("a tensor list item is not a tensor value before the list", v,
                       items->Get(i));
    }
  }
  return Error::Ok;
}

Error CheckOptionalTensorList(const NestedPlan& plan, const fb::OptionalTensorList& list,
                              uint32_t v) {
  const auto* items = list.items();
  for (uint32_t i = 0; i < Size(items); ++i) {
    // -1 is an absent tensor.
    if (items->Get(i) == -1) continue;
    if (!plan.IsValue(items->Get(i))) {
      return plan.Fail("optional tensor list item", v, items->Get(i));
    }
    const fb::KernelTypes t = plan.Type(items->Get(i));
    if ((t != fb::KernelTypes::Tensor && t != fb::KernelTypes::Null) ||
        static_cast<uint32_t>(items->Get(i)) >= v) {
      return plan.Fail(
          "an optional tensor list item is not a tensor or null value before "
          "the list",
          v, items->Get(i));
    }
  }
  return Error::Ok;
}

Error CheckTensor(const NestedPlan& plan, const fb::Tensor& tensor, uint32_t v, ValueFacts* facts) {
  uint64_t nbytes = ElementSize(tensor.scalar_type());
  if (nbytes == 0) return plan.Fail("a tensor has an unknown dtype", v, int(tensor.scalar_type()));
  const auto* sizes = tensor.sizes();
  // ExecuTorch (and the engine) store strides as int32: the product of the sizes from any
  // dimension to the innermost must fit, or computing the contiguous strides overflows.
  int64_t suffix = 1;
  for (uint32_t d = Size(sizes); d-- > 0;) {
    const int32_t s = sizes->Get(d);
    if (s < 0) return plan.Fail("a tensor has a negative size", v, s);
    suffix *= s;  // both factors <= INT32_MAX: no int64 overflow
    if (suffix > INT32_MAX) return plan.Fail("a tensor's strides overflow int32", v, s);
    nbytes *= static_cast<uint64_t>(s);  // <= 8 * INT32_MAX
  }
  if (tensor.dim_order() != nullptr && Size(tensor.dim_order()) != Size(sizes)) {
    return plan.Fail("a tensor's dim order does not match its rank", v, Size(tensor.dim_order()));
  }
  const fb::AllocationDetails* where = tensor.allocation_info();
  if (where == nullptr) {
    // ExecuTorch gives a tensor data only from its memory plan, the program's constants or
    // (EXTERNAL) the named data; any other tensor has a null data pointer until the
    // application binds it, which the engine does for the method's inputs and outputs only.
    // A kernel writing a non-empty one writes through null.
    const bool constant = tensor.data_buffer_idx() > 0 || (tensor.extra_tensor_info() != nullptr &&
                                                           tensor.extra_tensor_info()->location() ==
                                                               fb::TensorDataLocation::EXTERNAL);
    // ExecuTorch's emitter leaves a torch.cond result and a view's output unplanned: a
    // MoveCall or the et_view kernel gives them data (CheckUnplannedTensors).
    if (!constant && nbytes > 0 && !plan.IsBound(v)) facts->unplanned.push_back(v);
    return Error::Ok;
  }
  std::vector<uint64_t>& extents = facts->extents;
  if (where->memory_id() >= extents.size()) {
    return plan.Fail("a tensor is planned in a buffer the method does not have", v,
                     where->memory_id());
  }
  const uint64_t offset =
      (uint64_t{where->memory_offset_high()} << 32) | where->memory_offset_low();
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, nbytes, &end)) {
    return plan.Fail("a planned tensor's extent overflows", v, static_cast<int64_t>(offset));
  }
  extents[where->memory_id()] = std::max(extents[where->memory_id()], end);
  return Error::Ok;
}

}  // namespace

Error CheckValues(const NestedPlan& plan, ValueFacts* facts) {
  const fb::ExecutionPlan& p = plan.plan();
  facts->extents.assign(Size(p.non_const_buffer_sizes()), 0);
  for (uint32_t v = 0; v < static_cast<uint32_t>(plan.num_values()); ++v) {
    const fb::EValue* value = p.values()->Get(v);
    const bool read = value->val_type() == fb::KernelTypes::Tensor ||
                      value->val_type() == fb::KernelTypes::TensorList ||
                      value->val_type() == fb::KernelTypes::OptionalTensorList ||
                      value->val_type() == fb::KernelTypes::IntList;
    if (read && value->val() == nullptr) {
      return plan.Fail("a tensor or tensor list value has no table", v,
                       static_cast<int64_t>(value->val_type()));
    }
    Error err = Error::Ok;
    switch (value->val_type()) {
      case fb::KernelTypes::IntList:
        err = CheckIntList(plan, *value->val_as_IntList(), v);
        break;
      case fb::KernelTypes::TensorList:
        err = CheckTensorList(plan, *value->val_as_TensorList(), v);
        break;
      case fb::KernelTypes::OptionalTensorList:
        err = CheckOptionalTensorList(plan, *value->val_as_OptionalTensorList(), v);
        break;
      case fb::KernelTypes::Tensor:
        err = CheckTensor(plan, *value->val_as_Tensor(), v, facts);
        break;
      default:
        break;
    }
    if (err != Error::Ok) return err;
  }
  return Error::Ok;
}

}  // namespace executorch_trt::nested_plan
