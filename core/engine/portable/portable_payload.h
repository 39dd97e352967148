// Copyright (c) executorch-trt authors.
//
// portable_payload.h: the engine payload of a "portable" blob
// (docs/formats/portable_payload.md): a 32-byte header, a JSON descriptor of the engine's
// I/O binding names and of the nested method's external constants, and a nested ExecuTorch
// program (.pte). Which output updates which
// input in place is not in the payload: it is stored once, in the blob metadata's
// `aliased_io`.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// "ETPE", the first four bytes of a portable engine payload.
inline constexpr char kPortablePayloadMagic[4] = {'E', 'T', 'P', 'E'};
// The version this runtime writes; it reads kPortablePayloadMinVersion..this (version 2 is
// version 3 without "constants").
inline constexpr uint32_t kPortablePayloadVersion = 3;
inline constexpr uint32_t kPortablePayloadMinVersion = 2;
inline constexpr size_t kPortablePayloadHeaderSize = 32;

// Byte offsets of the payload header fields (the table in docs/formats/portable_payload.md),
// all little-endian.
inline constexpr size_t kPortablePayloadOffsetMagic = 0;           // char[4] "ETPE"
inline constexpr size_t kPortablePayloadOffsetVersion = 4;         // u32
inline constexpr size_t kPortablePayloadOffsetDescriptorSize = 8;  // u64
inline constexpr size_t kPortablePayloadOffsetProgramOffset = 16;  // u64
inline constexpr size_t kPortablePayloadOffsetProgramSize = 24;    // u64

// The layout of one external constant of the nested method: what the nested method asks its
// NamedDataMap for (get_tensor_layout) and what its data must measure (nbytes).
struct ConstantLayoutSpec {
  std::string key;  // the constant's key in the outer program's named data
  executorch::aten::ScalarType scalar_type;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
  size_t nbytes = 0;  // elementSize(scalar_type) * product(sizes)
};

// The decoded payload. `program` borrows the payload bytes it was parsed from.
struct PortablePayload {
  // Binding names in the nested method's input / output order.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // The nested method's external constants (empty in version 2).
  std::vector<ConstantLayoutSpec> constants;
  // The nested .pte, inside the parsed bytes.
  const uint8_t* program = nullptr;
  size_t program_size = 0;

  // Parses `size` bytes at `data`.
  //
  // Errors (Error::InvalidProgram, each logged with field and value): null or short
  // data, wrong magic, version outside [2, 3] (Error::DelegateInvalidCompatibility),
  // descriptor or program outside the payload (overflow-checked), program overlapping the
  // descriptor or not 16-byte aligned, descriptor not a JSON object with the keys "inputs"
  // and "outputs" (and, from version 3, optionally "constants") and no other, names not
  // unique non-empty strings; a constant entry without exactly "key" (non-empty, unique),
  // "scalar_type" (a valid ScalarType), "sizes" (at most 16 int32 >= 0) and "dim_order" (a
  // permutation of the dimensions), or whose byte size overflows size_t.
  // Never reads outside [data, data + size). Never throws. Thread-safe.
  static executorch::runtime::Result<PortablePayload> Parse(const uint8_t* data, size_t size);
};

}  // namespace executorch_trt
