// Copyright (c) executorch-trt authors.
//
// dtype_names.h: the dtype names a session file and a program's fingerprint use ("float32",
// "int64", ...): executorch_trt.format.wire.DTYPES on the Python side, which reads and writes
// the same files.

#pragma once

#include <string>
#include <string_view>

#include "core/common/runtime_types.h"

namespace executorch_trt::extension::llm {

// "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64",
// "bool" for those ScalarTypes; "" for any other (a session file cannot hold it).
std::string DTypeName(ScalarType dtype);

// The ScalarType a name above stands for; false for any other string (*dtype untouched).
bool ParseDTypeName(std::string_view name, ScalarType* dtype);

}  // namespace executorch_trt::extension::llm
