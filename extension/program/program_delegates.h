// Copyright (c) executorch-trt authors.
//
// program_delegates.h: the check LoadedProgram runs on a program's delegate entries before
// ExecuTorch loads a method (core/schema/compile_specs.h says why). Its own translation unit:
// it reads the program with this repository's FlatBuffers code, which must not meet the
// FlatBuffers release ExecuTorch's headers include.

#pragma once

#include <cstddef>
#include <string>

#include <executorch/runtime/core/error.h>

namespace executorch_trt::extension {

// Verifies the program flatbuffer at `data` (`size` bytes, the whole .pte) and refuses a
// delegate with a compile spec missing its key or value: Error::InvalidProgram and *problem
// naming the method and the delegate.
executorch::runtime::Error CheckProgramDelegates(const void* data, size_t size,
                                                 std::string* problem);

}  // namespace executorch_trt::extension
