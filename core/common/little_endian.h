// Copyright (c) executorch-trt authors.
//
// little_endian.h: reads of the unsigned little-endian integers every on-disk header of
// the delegate stores (docs/formats/delegate_blob.md, docs/formats/portable_payload.md).
// Independent of the host's byte order and alignment.

#pragma once

#include <cstdint>

namespace executorch_trt {

// The u32 stored little-endian at `p[0..3]`.
//
// Bounds are the caller's job: `p` must point to at least 4 readable bytes (callers check
// the header size before reading any field). Never fails.
inline uint32_t ReadU32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// The u64 stored little-endian at `p[0..7]`.
//
// Bounds are the caller's job: `p` must point to at least 8 readable bytes. Never fails.
inline uint64_t ReadU64(const uint8_t* p) {
  return uint64_t{ReadU32(p)} | (uint64_t{ReadU32(p + 4)} << 32);
}

}  // namespace executorch_trt
