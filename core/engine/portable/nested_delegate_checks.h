// Copyright (c) executorch-trt authors.
//
// nested_delegate_checks.h: checks of the XNNPACK delegates inside a portable engine's nested
// program, before the nested method is loaded (which compiles them).
//
// ExecuTorch 1.5.1's XnnpackBackend (XNNCompiler::compileModel) hands each constant tensor's
// data to XNNPACK with the tensor's dims as the XNNGraph records them, without comparing
// them with the size of the data it found (the named data entry or the constant segment): a
// weight whose dims were corrupted ([8, 8] -> [8, 3473416]) makes xnn_create_fully_connected
// read megabytes past a 256-byte buffer (SIGSEGV; found by //tests/py:load_fuzz_test through
// the Python runtime). The blob checksum only stops accidental corruption.
#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/named_data_map.h>

namespace executorch_trt {

// Checks every "XnnpackBackend" delegate of method `method_name` of the program in
// [data, data + size) (already accepted by CheckNestedProgram), its payload stored inline or in
// a segment of the program (the exporter writes segments).
// Returns Error::Ok when, for each: its payload has a valid XNNPACK header ("XH00") with the
// flatbuffer and constant sections inside the payload, or is a bare XNNGraph flatbuffer; the
// XNNGraph (identifier "XN00" or "XN01") passes flatbuffers' verifier; and every constant
// tensor value's bytes (product of its dims times its element size; the product must not
// overflow) fit in the data it names: its named-data entry in `named_data` (when it has a key
// and `named_data` has the entry; a missing entry is left to XNNPACK's loader, which fails
// cleanly), its range of the header's constant section, or its inline buffer. Otherwise
// Error::InvalidProgram with one ET_LOG line naming the delegate, the value, its dims and both
// sizes. A payload ExecuTorch's loader cannot find (bad index, segment outside the data) is
// left to that loader, which fails cleanly. `data` must be 16-byte aligned (else
// Error::InvalidArgument). Never reads outside [data, data + size). Does not retain anything.
executorch::runtime::Error CheckNestedXnnpackDelegates(
    const void* data, size_t size, const char* method_name,
    const executorch::runtime::NamedDataMap* named_data);

}  // namespace executorch_trt
