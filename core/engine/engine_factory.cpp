// Copyright (c) executorch-trt authors.

#include "core/engine/engine_factory.h"

#include <utility>

#include <executorch/runtime/platform/log.h>

#include "core/engine/portable/portable_engine.h"
#include "core/engine/tensorrt/tensorrt_engine.h"

namespace executorch_trt {

using executorch::runtime::Error;
using executorch::runtime::Result;

Result<std::unique_ptr<Engine>> CreateEngine(EngineKind kind, const uint8_t* payload, size_t size,
                                             const executorch::runtime::NamedDataMap* named_data) {
  switch (kind) {
    case EngineKind::kPortable: {
      Result<std::unique_ptr<PortableEngine>> engine =
          PortableEngine::Create(payload, size, named_data);
      if (!engine.ok()) {
        return engine.error();
      }
      return std::unique_ptr<Engine>(std::move(engine.get()));
    }
    case EngineKind::kTensorRT:
      return CreateTensorRTEngine(payload, size);
  }
  // Unreachable for a value DelegateMetadata::Parse produced.
  ET_LOG(Error, "executorch_trt: unknown engine kind %d.", static_cast<int>(kind));
  return Error::InvalidProgram;
}

}  // namespace executorch_trt
