// Copyright (c) executorch-trt authors.

#include "core/common/error_text.h"

#include <string_view>

#include <executorch/runtime/core/error.h>

namespace executorch_trt {

std::string ErrorText(Error err) {
  std::string_view name = executorch::runtime::to_string(err);
  constexpr std::string_view kPrefix = "Error::";
  if (name.substr(0, kPrefix.size()) == kPrefix) {
    name.remove_prefix(kPrefix.size());
  }
  return std::to_string(static_cast<int>(err)) + ": " + std::string(name);
}

}  // namespace executorch_trt
