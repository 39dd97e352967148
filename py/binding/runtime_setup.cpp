// Copyright (c) executorch-trt authors.

#include "py/binding/runtime_setup.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <executorch/runtime/platform/runtime.h>

#include "py/binding/stderr_log.h"

// libexecutorch_threadpool.so's accessor for ExecuTorch's CPU thread pool. The wheel's SDK
// ships the library but not its header (extension/threadpool/threadpool.h); the pool itself
// is only ever used through this pointer's side effect (its creation), never dereferenced.
namespace executorch::extension::threadpool {
class ThreadPool;
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool

namespace executorch_trt::python {

void InitializeRuntimeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* verbose = std::getenv(kVerboseEnv);
    SetLogVerbose(verbose != nullptr && *verbose != '\0' && std::strcmp(verbose, "0") != 0);
    executorch::runtime::runtime_init();
    UseStderrLog();
    (void)executorch::extension::threadpool::get_threadpool();
  });
}

}  // namespace executorch_trt::python
