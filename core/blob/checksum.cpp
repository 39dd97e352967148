// Copyright (c) executorch-trt authors.
//
// BLAKE2b-64 through the BLAKE2 reference library (libb2), linked statically. libb2 picks its
// SSE/AVX implementation on its first call; threads racing to that call all store the same
// choice, so concurrent first calls are harmless.

#include "core/blob/checksum.h"

#include <blake2.h>

#include "core/common/little_endian.h"

namespace executorch_trt {

uint64_t Blake2b64(const void* data, size_t size) {
  // An unkeyed 8-byte digest: the digest length goes into BLAKE2b's parameter block.
  uint8_t digest[8] = {};
  // libb2 fails only on arguments this call never passes (a null `data` with a non-zero
  // `size`, which the contract rules out; a digest length outside 1..64; a key).
  blake2b(digest, data, /*key=*/nullptr, sizeof(digest), size, /*keylen=*/0);
  return ReadU64(digest);  // the 8 digest bytes as a little-endian u64
}

}  // namespace executorch_trt
