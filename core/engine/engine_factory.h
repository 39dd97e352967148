// Copyright (c) executorch-trt authors.
//
// engine_factory.h: the one place that maps an EngineKind (the blob metadata's `engine`)
// to the Engine implementation that runs its payload.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <executorch/runtime/core/result.h>

#include <executorch/runtime/core/named_data_map.h>
#include "core/blob/delegate_metadata.h"

#include "core/engine/engine.h"

namespace executorch_trt {

// Creates the engine of kind `kind` over `size` bytes of engine payload at `payload` (the
// payload section of a delegate blob, docs/formats/delegate_blob.md). `named_data` is the program's
// named data (BackendInitContext::get_named_data_map(); may be null): a portable engine's
// nested program resolves the data its own delegates stored there (XNNPACK's weights, stored
// once per program however many methods use them). Borrowed; it must outlive the engine.
//
// Ownership: whether `payload` is borrowed or copied is the engine's rule (a portable
// engine borrows it, so it must outlive the engine; a TensorRT plan is copied by the
// TensorRT runtime).
//
// Errors are those of the engine's own constructor, each logged there:
//   - EngineKind::kPortable: PortableEngine::Create (core/engine/portable/portable_engine.h):
//     Error::InvalidProgram / Error::DelegateInvalidCompatibility for a bad payload
//     (PortablePayload::Parse), the nested program's load errors, e.g.
//     Error::OperatorMissing for a kernel not linked in.
//   - EngineKind::kTensorRT: CreateTensorRTEngine (core/engine/tensorrt/tensorrt_engine.h):
//     Error::NotSupported in a build without TensorRT, else Error::InvalidProgram or
//     Error::NotImplemented.
// Never crashes on any bytes. Thread-safe.
executorch::runtime::Result<std::unique_ptr<Engine>> CreateEngine(
    EngineKind kind, const uint8_t* payload, size_t size,
    const executorch::runtime::NamedDataMap* named_data = nullptr);

}  // namespace executorch_trt
