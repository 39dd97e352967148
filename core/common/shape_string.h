// Copyright (c) executorch-trt authors.
//
// shape_string.h: how log lines of the delegate print a tensor shape.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace executorch_trt {

// `shape` as "[1, 8, 4]" ("[]" for a 0-d shape). Never fails (may throw std::bad_alloc
// like any std::string).
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace executorch_trt
