// Copyright (c) executorch-trt authors.
//
// blob_header.h: the fixed 64-byte header of a delegate blob (docs/formats/delegate_blob.md).
//
// The header locates the metadata JSON and the engine payload inside the blob and
// states the format version and the features a reader must understand. Parsing fails
// closed: anything a reader cannot prove it understands is rejected, so version skew
// never turns into a silently wrong binding.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// "ETRT", the first four bytes of every delegate blob.
inline constexpr char kBlobMagic[4] = {'E', 'T', 'R', 'T'};

// The format versions this runtime reads: 1 (static shapes) through kBlobFormatVersion.
// Version 2 adds dynamic dimensions (`symbols`; docs/formats/delegate_blob.md); a writer stamps 2
// only on a blob that has one, so static delegates still load in version-1 runtimes.
inline constexpr uint32_t kBlobFormatVersionMin = 1;
inline constexpr uint32_t kBlobFormatVersionDynamic = 2;
inline constexpr uint32_t kBlobFormatVersion = 2;

// Minimum (and, in version 1, exact) size of the header in bytes.
inline constexpr uint32_t kBlobMinHeaderSize = 64;

// Alignment of `payload_offset` relative to the start of the blob.
inline constexpr uint64_t kBlobPayloadAlignment = 16;

// Bits of `required_features`. A blob that sets a bit this runtime does not know is
// rejected (Error::DelegateInvalidCompatibility).
enum BlobFeature : uint64_t {
  // `aliased_io` entries must be honoured.
  kBlobFeatureAliasedIo = uint64_t{1} << 0,
  // Each aliased entry carries `ownership`.
  kBlobFeatureOwnership = uint64_t{1} << 1,
  // The header's `checksum` (offset 56) holds the BLAKE2b-64 (core/blob/checksum.h) of
  // every byte from `metadata_offset` to the end of the payload; a reader verifies it.
  kBlobFeatureChecksum = uint64_t{1} << 2,
};

// All feature bits this runtime understands.
inline constexpr uint64_t kBlobKnownFeatures =
    kBlobFeatureAliasedIo | kBlobFeatureOwnership | kBlobFeatureChecksum;

// Byte offsets of the header fields (the table in docs/formats/delegate_blob.md), all
// little-endian.
inline constexpr size_t kBlobOffsetMagic = 0;              // char[4] "ETRT"
inline constexpr size_t kBlobOffsetHeaderSize = 4;         // u32
inline constexpr size_t kBlobOffsetFormatVersion = 8;      // u32
inline constexpr size_t kBlobOffsetReserved = 12;          // u32, 0
inline constexpr size_t kBlobOffsetRequiredFeatures = 16;  // u64
inline constexpr size_t kBlobOffsetMetadataOffset = 24;    // u64
inline constexpr size_t kBlobOffsetMetadataSize = 32;      // u64
inline constexpr size_t kBlobOffsetPayloadOffset = 40;     // u64
inline constexpr size_t kBlobOffsetPayloadSize = 48;       // u64
inline constexpr size_t kBlobOffsetChecksum = 56;          // u64

// The decoded, validated header of a delegate blob.
//
// A BlobHeader is a plain value: it does not reference the blob it was parsed from.
// Use `Metadata()` / `Payload()` with the same bytes to get views of the two sections.
struct BlobHeader {
  uint32_t header_size = 0;
  uint32_t format_version = 0;
  uint64_t required_features = 0;
  uint64_t metadata_offset = 0;
  uint64_t metadata_size = 0;
  uint64_t payload_offset = 0;
  uint64_t payload_size = 0;
  // The stored checksum (0 unless `required_features` has kBlobFeatureChecksum).
  uint64_t checksum = 0;

  // Parses and validates the header at the start of `data` (`size` bytes: the whole
  // blob).
  //
  // Returns the header on success. Errors (each with an ET_LOG line giving the field,
  // its value and the limit it broke):
  //   - Error::InvalidProgram: `data` is null, `size` < 64, wrong magic, a non-zero
  //     reserved u32 (offset 12), `header_size`
  //     < 64, a section that overlaps the header, `payload_offset` not 16-byte aligned,
  //     any offset+size that overflows uint64 or ends past `size`; with
  //     kBlobFeatureChecksum: metadata not wholly before the payload, or a checksum
  //     that does not match the bytes (the blob is corrupted); without it: a non-zero
  //     `checksum` field (reserved, 0 in blobs without the feature).
  //   - Error::DelegateInvalidCompatibility: `format_version` outside
  //     [kBlobFormatVersionMin, kBlobFormatVersion], or a
  //     `required_features` bit outside kBlobKnownFeatures (blob from a newer or older
  //     writer; re-export with a matching version).
  // Never reads outside [data, data + size). Thread-safe; does not retain `data`.
  // With kBlobFeatureChecksum this reads every byte of the metadata and payload once.
  static executorch::runtime::Result<BlobHeader> Parse(const void* data, size_t size);

  // The metadata JSON section of `blob`, which must be the bytes this header was parsed
  // from. The view borrows `blob`.
  std::string_view Metadata(const void* blob) const;

  // Pointer to the engine payload inside `blob` (the bytes this header was parsed
  // from); `payload_size` bytes long. Borrows `blob`.
  const uint8_t* Payload(const void* blob) const;
};

}  // namespace executorch_trt
