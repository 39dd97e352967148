// Copyright (c) executorch-trt authors.

#include "extension/llm/dtype_names.h"

#include <utility>

namespace executorch_trt::extension::llm {
namespace {

constexpr std::pair<ScalarType, const char*> kNames[] = {
    {ScalarType::Float, "float32"},     {ScalarType::Half, "float16"},
    {ScalarType::BFloat16, "bfloat16"}, {ScalarType::Double, "float64"},
    {ScalarType::Char, "int8"},         {ScalarType::Byte, "uint8"},
    {ScalarType::Short, "int16"},       {ScalarType::Int, "int32"},
    {ScalarType::Long, "int64"},        {ScalarType::Bool, "bool"},
};

}  // namespace

std::string DTypeName(ScalarType dtype) {
  for (const auto& [type, name] : kNames) {
    if (type == dtype) {
      return name;
    }
  }
  return "";
}

bool ParseDTypeName(std::string_view name, ScalarType* dtype) {
  for (const auto& [type, known] : kNames) {
    if (name == known) {
      *dtype = type;
      return true;
    }
  }
  return false;
}

}  // namespace executorch_trt::extension::llm
