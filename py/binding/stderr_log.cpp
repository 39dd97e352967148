// Copyright (c) executorch-trt authors.

#include "py/binding/stderr_log.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include <executorch/runtime/platform/platform.h>

namespace executorch_trt::python {
namespace {

// The innermost LogCapture of this thread, or null.
thread_local LogCapture* t_capture = nullptr;

std::atomic<bool> g_verbose{false};

// "I 00:00:01.234567 executorch:program.cpp:123] message\n", as ExecuTorch's default PAL
// prints it, in one write(2) so that lines of concurrent threads do not interleave.
void EmitLog(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
             const char* /*function*/, size_t line, const char* message, size_t length) {
  const bool failure = level == kError || level == kFatal;
  // Debug and info lines say what went right; only errors explain a failure.
  if (t_capture != nullptr && message != nullptr && failure) {
    t_capture->Add(message, length);
  }
  if (!failure && !g_verbose.load(std::memory_order_relaxed)) {
    return;
  }
  const char* slash = filename != nullptr ? std::strrchr(filename, '/') : nullptr;
  const char* base = slash != nullptr ? slash + 1 : (filename != nullptr ? filename : "?");
  const et_tick_ratio_t ratio = et_pal_ticks_to_ns_multiplier();
  const unsigned long long ns =
      ratio.denominator != 0 ? timestamp * ratio.numerator / ratio.denominator : timestamp;
  const unsigned long long us = ns / 1000;
  char header[256];
  const int n =
      std::snprintf(header, sizeof(header), "%c %02llu:%02llu:%02llu.%06llu executorch:%s:%zu] ",
                    static_cast<char>(level), us / 3600000000ULL, (us / 60000000ULL) % 60,
                    (us / 1000000ULL) % 60, us % 1000000ULL, base, line);
  struct iovec parts[3];
  parts[0].iov_base = header;
  parts[0].iov_len = n > 0 ? std::min(static_cast<size_t>(n), sizeof(header) - 1) : 0;
  parts[1].iov_base = const_cast<char*>(message);
  parts[1].iov_len = message != nullptr ? length : 0;
  parts[2].iov_base = const_cast<char*>("\n");
  parts[2].iov_len = 1;
  const ssize_t written = writev(STDERR_FILENO, parts, 3);
  (void)written;  // nowhere to report a failed log write
}

}  // namespace

LogCapture::LogCapture() : previous_(t_capture) {
  // Add never allocates (text_ stays within kMaxBytes): it runs inside ExecuTorch's logging,
  // where an exception must not be thrown.
  text_.reserve(kMaxBytes);
  t_capture = this;
}

LogCapture::~LogCapture() { t_capture = previous_; }

void LogCapture::Add(const char* message, size_t length) {
  // ExecuTorch's messages carry no newline of their own; a trailing one would leave an empty
  // line.
  while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) {
    --length;
  }
  // A line that does not fit whole is cut, and every later line dropped (counted): what is
  // kept is the start of the log, in order, as it reads on stderr.
  const size_t used = text_.size() + 3;  // + "  " and "\n"
  const size_t kept = dropped_ > 0 || used >= kMaxBytes ? 0 : std::min(length, kMaxBytes - used);
  if (kept > 0) {
    text_.append("  ").append(message, kept).push_back('\n');
  }
  dropped_ += length - kept;
}

std::string LogCapture::Lines() const {
  std::string lines = text_;
  if (dropped_ > 0) {
    lines += "  (" + std::to_string(dropped_) + " more bytes of log messages on stderr)\n";
  }
  if (!lines.empty()) {
    lines.pop_back();  // no trailing newline: the caller places the block
  }
  return lines;
}

void UseStderrLog() {
  const executorch::runtime::PalImpl* current = executorch::runtime::get_pal_impl();
  if (current == nullptr || current->emit_log_message == &EmitLog) {
    return;
  }
  // The table is ExecuTorch's own (mutable) PAL object behind a const pointer; every log line
  // reads its emit_log_message, so this is register_pal's effect without its error line.
  const_cast<executorch::runtime::PalImpl*>(current)->emit_log_message = &EmitLog;
}

void SetLogVerbose(bool verbose) { g_verbose.store(verbose, std::memory_order_relaxed); }

bool LogVerbose() { return g_verbose.load(std::memory_order_relaxed); }

}  // namespace executorch_trt::python
