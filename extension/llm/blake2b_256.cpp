// Copyright (c) executorch-trt authors.

#include "extension/llm/blake2b_256.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace executorch_trt::extension::llm {

// libb2 fails only on arguments these calls never pass (an output length outside 1..64, a null
// input with a non-zero length), so its return values are not checked.
Blake2b256::Blake2b256() { blake2b_init(&state_, 32); }

void Blake2b256::Update(const void* data, size_t size) {
  if (size > 0) {
    blake2b_update(&state_, static_cast<const uint8_t*>(data), size);
  }
}

Blake2b256Digest Blake2b256::Digest() {
  Blake2b256Digest digest{};
  blake2b_final(&state_, digest.data(), digest.size());
  return digest;
}

std::string HexDigest(const Blake2b256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t b : digest) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

bool Blake2b256OfFile(const std::string& path, std::string* hex, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  Blake2b256 hash;
  std::vector<uint8_t> block(size_t{1} << 22);
  size_t n = 0;
  while ((n = std::fread(block.data(), 1, block.size(), f)) > 0) {
    hash.Update(block.data(), n);
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    *error = path + ": read error";
    return false;
  }
  *hex = HexDigest(hash.Digest());
  return true;
}

}  // namespace executorch_trt::extension::llm
