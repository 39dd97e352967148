// Copyright (c) executorch-trt authors.
//
// blake2b_256.h: BLAKE2b (RFC 7693) with a 32-byte digest and no key, through libb2: the
// checksum at the end of a session file and the content hashes of a program's fingerprint, as
// Python computes them with hashlib.blake2b(digest_size=32).

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <blake2.h>

namespace executorch_trt::extension::llm {

using Blake2b256Digest = std::array<uint8_t, 32>;

// An incremental BLAKE2b-256: Update() any number of times, then Digest() once.
// Thread-safety: none (one object per hash).
class Blake2b256 {
 public:
  Blake2b256();
  // Hashes `size` bytes at `data` (`data` may be null when `size` is 0).
  void Update(const void* data, size_t size);
  // The digest of everything passed to Update(); call once.
  Blake2b256Digest Digest();

 private:
  blake2b_state state_;
};

// `digest` as 64 lowercase hex digits (hashlib's hexdigest()).
std::string HexDigest(const Blake2b256Digest& digest);

// The hex BLAKE2b-256 of the file at `path`, read in blocks. False with *error naming the file
// when it cannot be opened or read.
bool Blake2b256OfFile(const std::string& path, std::string* hex, std::string* error);

}  // namespace executorch_trt::extension::llm
