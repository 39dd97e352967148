// Copyright (c) executorch-trt authors.

#include "core/engine/tensorrt/tensorrt_engine.h"

#include <executorch/runtime/platform/log.h>

namespace executorch_trt {

using executorch::runtime::Error;
using executorch::runtime::Result;

#ifndef EXECUTORCH_TRT_HAS_TENSORRT

Result<std::unique_ptr<Engine>> CreateTensorRTEngine(const uint8_t* plan, size_t size) {
  (void)plan;
  ET_LOG(Error,
         "executorch_trt: this blob needs the 'tensorrt' engine (a %zu-byte TensorRT plan) "
         "but libexecutorch_trt was built without TensorRT; rebuild with TensorRT and CUDA "
         "(EXECUTORCH_TRT_HAS_TENSORRT), or export the model with the 'portable' engine.",
         size);
  return Error::NotSupported;
}

#else  // EXECUTORCH_TRT_HAS_TENSORRT

Result<std::unique_ptr<Engine>> CreateTensorRTEngine(const uint8_t* plan, size_t size) {
  (void)plan;
  // The nvinfer1 adapter (ICudaEngine/IExecutionContext behind Engine) is not written
  // yet; refuse rather than pretend.
  ET_LOG(Error,
         "executorch_trt: the TensorRT engine adapter is not implemented yet (%zu-byte "
         "plan); export the model with the 'portable' engine.",
         size);
  return Error::NotImplemented;
}

#endif  // EXECUTORCH_TRT_HAS_TENSORRT

}  // namespace executorch_trt
