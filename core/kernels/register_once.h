// Copyright (c) executorch-trt authors.
//
// register_once.h: registers an ExecuTorch kernel unless its operator already has one.

#pragma once

#include <cstring>

#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/log.h>

namespace executorch_trt {

// Registers `kernel` (keep it in a static: the registry refers to it) with ExecuTorch's kernel
// registry. ExecuTorch 1.5.1 aborts the process on a second registration of one operator
// (e.g. the static library linked into a binary that also dlopens libexecutorch_trt.so), so
// an operator that already has a kernel keeps it: this logs which and returns false.
// Returns true when `kernel` was registered. Call from a static initializer.
inline bool RegisterKernelOnce(const executorch::runtime::Kernel& kernel) {
  // Scan the registry directly: registry_has_op_function logs an error when the op is
  // absent, which is the normal case.
  for (const executorch::runtime::Kernel& k : executorch::runtime::get_registered_kernels()) {
    if (k.name_ != nullptr && std::strcmp(k.name_, kernel.name_) == 0) {
      ET_LOG(Error,
             "executorch_trt: %s is already registered (two copies of executorch_trt are "
             "loaded, or another library provides it); keeping the first. Link only one of "
             "the static library and libexecutorch_trt.so.",
             kernel.name_);
      return false;
    }
  }
  return executorch::runtime::register_kernel(kernel) == executorch::runtime::Error::Ok;
}

}  // namespace executorch_trt
