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

#include <cstddef>
#include <string>

namespace executorch_trt::python {

// Makes this file's log function ExecuTorch's PAL log function if it is not already (another
// library may have registered its own since). Cheap when nothing changed; call it before
// loading or running anything. It writes the log entry of ExecuTorch's live PAL table
// (`get_pal_impl()`) rather than calling `register_pal`, which logs an error line ("called
// multiple times", naming the wrong file) on every call after the first, and ExecuTorch's
// Python runtime always makes the first at its import.
void UseStderrLog();

// Whether debug- and info-level lines (ExecuTorch's cpuinfo probing, a delegate's binding
// plan) are written to stderr. Off by default: error and fatal lines are always written, and
// captured (LogCapture) either way. Thread-safe.
void SetLogVerbose(bool verbose);
bool LogVerbose();

// While a LogCapture is alive, the error- and fatal-level lines ExecuTorch logs on the thread
// that made it (through this file's log function) are also kept in it, so that a failure's
// exception can carry the reason a delegate or ExecuTorch logged instead of pointing at
// stderr, where the lines still go. Each thread captures its own lines only: a concurrent
// execute on another thread never mixes its lines in. At most kMaxBytes of messages are kept
// (the rest is counted and left on stderr). Captures nest: an inner one takes the lines until
// it ends. Not copyable; destroy it on the thread that made it.
class LogCapture {
 public:
  static constexpr size_t kMaxBytes = 4096;

  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The messages kept so far, one per line, each indented by two spaces (no timestamps or
  // file names), plus a last line saying how many bytes did not fit; empty when nothing was
  // logged.
  std::string Lines() const;

  // Appends one message (used by the log function; public for tests).
  void Add(const char* message, size_t length);

 private:
  std::string text_;
  size_t dropped_ = 0;
  LogCapture* previous_;
};

}  // namespace executorch_trt::python
