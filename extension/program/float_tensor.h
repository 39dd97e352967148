// Copyright (c) executorch-trt authors.
//
// float_tensor.h: a float32 tensor's values and shape, owned (e.g. a reference's input
// features, or encoder hidden states copied out of a method's output).

#pragma once

#include <cstdint>
#include <vector>

namespace executorch_trt::extension {

struct FloatTensor {
  std::vector<int64_t> shape;  // sizes, outermost first
  std::vector<float> data;     // contiguous, product(shape) values

  bool empty() const { return shape.empty(); }
};

}  // namespace executorch_trt::extension
