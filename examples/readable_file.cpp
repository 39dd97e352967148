// Copyright (c) executorch-trt authors.

#include "examples/readable_file.h"

#include <cstdio>

namespace executorch_trt::examples {

bool IsReadableFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return false;
  }
  const bool is_file = std::fseek(f, 0, SEEK_END) == 0 && std::ftell(f) >= 0;
  std::fclose(f);
  return is_file;
}

}  // namespace executorch_trt::examples
