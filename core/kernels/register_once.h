// Copyright (c) executorch-trt authors.
//
// register_once.h: registers an ExecuTorch kernel unless its operator already has one.

#pragma once

#include <executorch/runtime/kernel/operator_registry.h>

namespace executorch_trt {

// Registers `kernel` (keep it in a static: the registry refers to it) with ExecuTorch's kernel
// registry. ExecuTorch 1.5.1 aborts the process on a second registration of one operator
// (e.g. the static library linked into a binary that also dlopens libexecutorch_trt.so), so
// an operator that already has a kernel keeps it: this logs which and returns false.
// Returns true when `kernel` was registered. Call from a static initializer.
bool RegisterKernelOnce(const executorch::runtime::Kernel& kernel);

}  // namespace executorch_trt
