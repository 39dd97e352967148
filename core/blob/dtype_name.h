// Copyright (c) executorch-trt authors.
//
// dtype_name.h: the dtype vocabulary of the delegate blob (docs/formats/delegate_blob.md).
//
// The blob names element types with short strings ("float32", "int64", ...). This file
// maps them to and from ExecuTorch's `ScalarType`, the type the rest of the runtime uses.

#pragma once

#include <string>
#include <string_view>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// Parses a blob dtype name ("float32", "float16", "bfloat16", "float64", "int8",
// "uint8", "int16", "int32", "int64", "bool").
//
// Returns the ScalarType, or Error::InvalidProgram (with an ET_LOG line naming `name`
// and the accepted names) for any other string. `context` is prepended to the log line
// (e.g. "input 'x'") so the reader knows which binding carried the bad name.
// Thread-safe; no allocation beyond the log line.
executorch::runtime::Result<executorch::aten::ScalarType> ParseDTypeName(std::string_view name,
                                                                         std::string_view context);

// Returns the blob name of `type` ("float32", ...), or the ExecuTorch name of the type
// followed by " (not a blob dtype)" for types the blob cannot express. Never fails.
// Thread-safe; the returned string is owned by the caller.
std::string DTypeName(executorch::aten::ScalarType type);

}  // namespace executorch_trt
