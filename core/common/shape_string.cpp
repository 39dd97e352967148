// Copyright (c) executorch-trt authors.

#include "core/common/shape_string.h"

namespace executorch_trt {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace executorch_trt
