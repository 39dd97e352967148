// Copyright (c) executorch-trt authors.
//
// runtime_types.h: the ExecuTorch types the delegate's code is written in, named once for
// namespace executorch_trt (as ExecuTorch itself re-exports them into torch::executor).
// Types only one file uses are named in that file.

#pragma once

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>

namespace executorch_trt {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Result;
using executorch::runtime::Span;

}  // namespace executorch_trt
