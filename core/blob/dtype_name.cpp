// Copyright (c) executorch-trt authors.

#include "core/blob/dtype_name.h"

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/log.h>

namespace executorch_trt {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::Result;

struct DTypeEntry {
  std::string_view name;
  ScalarType type;
};

constexpr DTypeEntry kDTypes[] = {
    {"float32", ScalarType::Float},     {"float16", ScalarType::Half},
    {"bfloat16", ScalarType::BFloat16}, {"float64", ScalarType::Double},
    {"int8", ScalarType::Char},         {"uint8", ScalarType::Byte},
    {"int16", ScalarType::Short},       {"int32", ScalarType::Int},
    {"int64", ScalarType::Long},        {"bool", ScalarType::Bool},
};

}  // namespace

Result<ScalarType> ParseDTypeName(std::string_view name, std::string_view context) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.name == name) {
      return entry.type;
    }
  }
  const std::string shown(name);
  const std::string where(context);
  ET_LOG(Error,
         "executorch_trt: %s has unknown dtype '%s'; expected one of float32 float16 "
         "bfloat16 float64 int8 uint8 int16 int32 int64 bool. The blob was written by an "
         "incompatible exporter: re-export it with this runtime's version.",
         where.c_str(), shown.c_str());
  return Error::InvalidProgram;
}

std::string DTypeName(ScalarType type) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.type == type) {
      return std::string(entry.name);
    }
  }
  return std::string(executorch::runtime::toString(type)) + " (not a blob dtype)";
}

}  // namespace executorch_trt
