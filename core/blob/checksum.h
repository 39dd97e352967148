// Copyright (c) executorch-trt authors.
//
// checksum.h: the integrity checksum of a delegate blob (docs/formats/delegate_blob.md, feature
// bit CHECKSUM).
//
// The checksum is BLAKE2b (RFC 7693) with an 8-byte digest and no key ("BLAKE2b-64": the
// digest length is part of BLAKE2b's parameter block, so this is not a truncation of
// BLAKE2b-512). The 8 digest bytes, read as a little-endian u64, are the checksum value.
// Python computes the same value as
//   int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little").
// It detects accidental corruption (any changed byte); it is not a signature.

#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch_trt {

// BLAKE2b-64 of `size` bytes at `data` (`data` may be null when `size` is 0), as a
// little-endian u64. Reads exactly [data, data + size). Thread-safe; no allocation.
uint64_t Blake2b64(const void* data, size_t size);

}  // namespace executorch_trt
