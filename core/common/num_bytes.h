// Copyright (c) executorch-trt authors.
//
// num_bytes.h: bytes of a contiguous tensor of a dtype and sizes, for shapes the delegate has
// already validated (each size non-negative and the product within int32 elements, as the
// blob readers and nested-program checks guarantee); it does not check for overflow.
#pragma once

#include <cstddef>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace executorch_trt {

// elementSize(dtype) * product(sizes); `Sizes` is any range of integers (a shape vector,
// Tensor::sizes()).
template <typename Sizes>
size_t NumBytes(executorch::aten::ScalarType dtype, const Sizes& sizes) {
  size_t n = executorch::runtime::elementSize(dtype);
  for (auto d : sizes) {
    n *= static_cast<size_t>(d);
  }
  return n;
}

}  // namespace executorch_trt
