// Copyright (c) executorch-trt authors.
//
// portable_payload.h: the engine payload of a "portable" blob
// (core/engine/PORTABLE_FORMAT.md): a 32-byte header, a JSON descriptor of the engine's
// I/O binding names, and a nested ExecuTorch program (.pte). Which output updates which
// input in place is not in the payload: it is stored once, in the blob metadata's
// `aliased_io`.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// "ETPE", the first four bytes of a portable engine payload.
inline constexpr char kPortablePayloadMagic[4] = {'E', 'T', 'P', 'E'};
inline constexpr uint32_t kPortablePayloadVersion = 2;
inline constexpr size_t kPortablePayloadHeaderSize = 32;

// Byte offsets of the payload header fields (the table in core/engine/PORTABLE_FORMAT.md),
// all little-endian.
inline constexpr size_t kPortablePayloadOffsetMagic = 0;           // char[4] "ETPE"
inline constexpr size_t kPortablePayloadOffsetVersion = 4;         // u32
inline constexpr size_t kPortablePayloadOffsetDescriptorSize = 8;  // u64
inline constexpr size_t kPortablePayloadOffsetProgramOffset = 16;  // u64
inline constexpr size_t kPortablePayloadOffsetProgramSize = 24;    // u64

// The decoded payload. `program` borrows the payload bytes it was parsed from.
struct PortablePayload {
  // Binding names in the nested method's input / output order.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // The nested .pte, inside the parsed bytes.
  const uint8_t* program = nullptr;
  size_t program_size = 0;

  // Parses `size` bytes at `data`.
  //
  // Errors (Error::InvalidProgram, each logged with field and value): null or short
  // data, wrong magic, version != 2 (Error::DelegateInvalidCompatibility), descriptor or
  // program outside the payload (overflow-checked), program overlapping the descriptor
  // or not 16-byte aligned, descriptor not a JSON object with exactly the keys
  // "inputs" and "outputs", names not unique non-empty strings.
  // Never reads outside [data, data + size). Never throws. Thread-safe.
  static executorch::runtime::Result<PortablePayload> Parse(const uint8_t* data, size_t size);
};

}  // namespace executorch_trt
