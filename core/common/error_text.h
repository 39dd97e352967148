// Copyright (c) executorch-trt authors.
//
// error_text.h: how error messages name an ExecuTorch error code.

#pragma once

#include <string>

#include "core/common/runtime_types.h"

namespace executorch_trt {

// `err` as "18: InvalidArgument": the number ExecuTorch's own log lines print (in hex, 0x12)
// and the name error.h gives it ("Unknown" for a value it does not know). Never fails (may
// throw std::bad_alloc like any std::string).
std::string ErrorText(Error err);

}  // namespace executorch_trt
