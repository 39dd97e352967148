// Copyright (c) executorch-trt authors.
//
// runtime_setup.h: what ExecuTorch initialises lazily, initialised once, up front.

#pragma once

namespace executorch_trt::python {

// Set to anything but "" or "0": ExecuTorch's debug and info log lines are written too
// (SetLogVerbose, stderr_log.h), not only its errors. Read once, by InitializeRuntimeOnce.
inline constexpr char kVerboseEnv[] = "EXECUTORCH_TRT_VERBOSE";

// Once per process (later calls return at once): reads kVerboseEnv, initialises ExecuTorch's PAL
// (`runtime_init`), makes its log lines go straight to stderr (stderr_log.h), and creates
// ExecuTorch's CPU thread pool (`get_threadpool`, which queries cpuinfo and logs). Creating the
// pool here, from one thread, means no two methods' first execute race on its function-local
// static: ExecuTorch 1.5.1 creates it inside the first `parallel_for`, i.e. inside an
// execute, and a second thread's execute then waits on that static's guard. Call it without
// holding the GIL.
void InitializeRuntimeOnce();

}  // namespace executorch_trt::python
