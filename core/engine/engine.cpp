// Copyright (c) executorch-trt authors.

#include "core/engine/engine.h"

namespace executorch_trt {

const char* TensorIOModeName(TensorIOMode mode) {
  switch (mode) {
    case TensorIOMode::kNone:
      return "none";
    case TensorIOMode::kInput:
      return "input";
    case TensorIOMode::kOutput:
      return "output";
  }
  return "?";
}

}  // namespace executorch_trt
