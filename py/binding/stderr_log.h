// Copyright (c) executorch-trt authors.
//
// stderr_log.h: ExecuTorch's log lines written straight to file descriptor 2, never through
// Python.
//
// ExecuTorch's own Python runtime (executorch.extension.pybindings._C, imported by
// executorch.exir and executorch.runtime) registers a PAL log function that writes every log
// line to Python's sys.stderr. That function takes the GIL and decodes the line as strict
// UTF-8, which (verified on 1.5.1) deadlocks two threads whose first execute runs at once
// (one holds the GIL while waiting for the thread pool's static initialisation, the other
// logs from inside it and waits for the GIL), and aborts the process on a name with invalid
// UTF-8 bytes (a UnicodeDecodeError thrown through C++). This log function takes no lock and
// decodes nothing.

#pragma once

namespace executorch_trt::python {

// Makes this file's log function ExecuTorch's PAL log function if it is not already (another
// library may have registered its own since). Cheap when nothing changed; call it before
// loading or running anything.
void UseStderrLog();

}  // namespace executorch_trt::python
