// Copyright (c) executorch-trt authors.
//
// tensorrt_engine.h: the Engine over a serialized TensorRT plan.
//
// Built for real only where TensorRT and CUDA are present (macro
// EXECUTORCH_TRT_HAS_TENSORRT defined by the build). Without it, creation fails with a
// clear error: a blob that needs TensorRT never runs on something else by accident.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <executorch/runtime/core/result.h>

#include "core/engine/engine.h"

namespace executorch_trt {

// Deserializes `size` bytes of TensorRT plan at `plan` into an Engine.
//
// Without TensorRT in the build: returns Error::NotSupported and logs "built without
// TensorRT". With TensorRT: the plan is copied by the TensorRT runtime (not retained);
// errors are Error::InvalidProgram (the plan does not deserialize) or
// Error::NotImplemented (the adapter is not written yet).
// Thread-safe.
executorch::runtime::Result<std::unique_ptr<Engine>> CreateTensorRTEngine(const uint8_t* plan,
                                                                          size_t size);

}  // namespace executorch_trt
