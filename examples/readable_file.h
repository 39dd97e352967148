// Copyright (c) executorch-trt authors.
//
// readable_file.h: whether a path names a file this process can open and read, so that the
// command-line tools (the runners, //benchmarks:decode_step_cpp) reject a bad path as bad usage
// (exit 2) with their own message before ExecuTorch tries to load it.

#pragma once

#include <string>

namespace executorch_trt::examples {

// True when `path` opens for reading and is seekable to its end (a regular file, not a
// directory). Never throws.
bool IsReadableFile(const std::string& path);

}  // namespace executorch_trt::examples
