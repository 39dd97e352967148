// Copyright (c) executorch-trt authors.
//
// shape_string.h: how messages and log lines print a tensor's shape, and its dtype and shape.

#pragma once

#include <string>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace executorch_trt {

// `sizes` as "[1, 8, 4]" ("[]" for a 0-d shape). `Sizes` is any range of integers: a shape
// vector, Tensor::sizes(), TensorInfo::sizes(). Never fails (may throw std::bad_alloc like any
// std::string).
template <typename Sizes>
std::string ShapeString(const Sizes& sizes) {
  std::string s = "[";
  const char* separator = "";
  for (auto size : sizes) {
    s += separator + std::to_string(size);
    separator = ", ";
  }
  return s + "]";
}

// A tensor's dtype and shape as "Float [1, 8, 4]" (ExecuTorch's name of the dtype). Never fails
// (may throw std::bad_alloc).
template <typename Sizes>
std::string SpecString(executorch::aten::ScalarType dtype, const Sizes& sizes) {
  return std::string(executorch::runtime::toString(dtype)) + " " + ShapeString(sizes);
}

}  // namespace executorch_trt
