// Copyright (c) executorch-trt authors.
//
// copy_counter.h: a process-wide count of the bytes the delegate copied to reflect an
// in-place update into a separate output tensor.
//
// The in-place contract: a decode step copies no cache bytes when the exporter made the
// aliased output the same value as the buffer. Tests
// and benchmarks read this counter to prove it. It counts only the delegate's own
// reflect copies (BindingPlan execution), not copies ExecuTorch or kernels make.

#pragma once

#include <cstdint>

namespace executorch_trt {

// Adds `nbytes` to the counter. Thread-safe (relaxed atomic).
void AddBytesCopied(uint64_t nbytes);

// Returns the bytes counted since process start (callers take deltas). Thread-safe.
uint64_t BytesCopied();

}  // namespace executorch_trt

// C entry point for ctypes (Python) and other languages: BytesCopied().
extern "C" uint64_t executorch_trt_bytes_copied(void);
