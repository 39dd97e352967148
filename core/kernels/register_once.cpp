// Copyright (c) executorch-trt authors.

#include "core/kernels/register_once.h"

#include <cstring>

#include <executorch/runtime/platform/log.h>

namespace executorch_trt {

bool RegisterKernelOnce(const executorch::runtime::Kernel& kernel) {
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
