// Copyright (c) executorch-trt authors.

#include "core/blob/blob_header.h"

#include <cinttypes>
#include <cstring>

#include <executorch/runtime/platform/log.h>

#include "core/blob/checksum.h"
#include "core/common/little_endian.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;

// Checks that [offset, offset + size) lies inside [min_offset, blob_size) without
// overflow. Logs and returns false otherwise.
bool SectionFits(const char* section, uint64_t offset, uint64_t size, uint64_t min_offset,
                 uint64_t blob_size) {
  if (offset < min_offset) {
    ET_LOG(Error,
           "executorch_trt: blob %s_offset %" PRIu64 " overlaps the %" PRIu64
           "-byte header; the blob is corrupt, re-export it.",
           section, offset, min_offset);
    return false;
  }
  if (offset > blob_size || size > blob_size - offset) {
    ET_LOG(Error,
           "executorch_trt: blob %s section [offset %" PRIu64 ", size %" PRIu64
           ") runs past the end of the %" PRIu64
           "-byte blob; the blob is truncated or corrupt, re-export it.",
           section, offset, size, blob_size);
    return false;
  }
  return true;
}

// Verifies the CHECKSUM feature (docs/formats/delegate_blob.md "Integrity"). `h` has passed every
// range check, so both sections lie inside the blob and their ends do not overflow.
Error VerifyChecksum(const BlobHeader& h, const uint8_t* bytes) {
  if ((h.required_features & kBlobFeatureChecksum) == 0) {
    if (h.checksum != 0) {
      ET_LOG(Error,
             "executorch_trt: blob checksum field is 0x%016" PRIx64
             " but required_features "
             "0x%" PRIx64
             " lacks the CHECKSUM bit (the field is reserved, 0, without it); "
             "the blob is corrupted; re-export.",
             h.checksum, h.required_features);
      return Error::InvalidProgram;
    }
    return Error::Ok;  // an older writer: nothing to verify
  }
  const uint64_t metadata_end = h.metadata_offset + h.metadata_size;
  if (metadata_end > h.payload_offset) {
    ET_LOG(Error,
           "executorch_trt: blob metadata [offset %" PRIu64 ", size %" PRIu64
           ") does not end before the payload at offset %" PRIu64
           "; a checksummed blob stores metadata, padding, then payload. The blob is "
           "corrupted; re-export.",
           h.metadata_offset, h.metadata_size, h.payload_offset);
    return Error::InvalidProgram;
  }
  const uint64_t end = h.payload_offset + h.payload_size;
  const uint64_t actual =
      Blake2b64(bytes + h.metadata_offset, static_cast<size_t>(end - h.metadata_offset));
  if (actual != h.checksum) {
    ET_LOG(Error,
           "executorch_trt: blob checksum mismatch over bytes [%" PRIu64 ", %" PRIu64
           "): expected 0x%016" PRIx64 " (stored in the header), actual 0x%016" PRIx64
           "; the blob is corrupted; re-export.",
           h.metadata_offset, end, h.checksum, actual);
    return Error::InvalidProgram;
  }
  return Error::Ok;
}

}  // namespace

Result<BlobHeader> BlobHeader::Parse(const void* data, size_t size) {
  if (data == nullptr) {
    ET_LOG(Error, "executorch_trt: delegate blob is null.");
    return Error::InvalidProgram;
  }
  if (size < kBlobMinHeaderSize) {
    ET_LOG(Error,
           "executorch_trt: delegate blob is %zu bytes, shorter than the %" PRIu32
           "-byte header; the blob is truncated, re-export it.",
           size, kBlobMinHeaderSize);
    return Error::InvalidProgram;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (std::memcmp(bytes + kBlobOffsetMagic, kBlobMagic, sizeof(kBlobMagic)) != 0) {
    ET_LOG(Error,
           "executorch_trt: delegate blob magic is %02x %02x %02x %02x, expected 'ETRT'; "
           "this is not an executorch-trt blob (or it was written by an older format).",
           bytes[0], bytes[1], bytes[2], bytes[3]);
    return Error::InvalidProgram;
  }
  BlobHeader h;
  h.header_size = ReadU32(bytes + kBlobOffsetHeaderSize);
  h.format_version = ReadU32(bytes + kBlobOffsetFormatVersion);
  h.required_features = ReadU64(bytes + kBlobOffsetRequiredFeatures);
  h.metadata_offset = ReadU64(bytes + kBlobOffsetMetadataOffset);
  h.metadata_size = ReadU64(bytes + kBlobOffsetMetadataSize);
  h.payload_offset = ReadU64(bytes + kBlobOffsetPayloadOffset);
  h.payload_size = ReadU64(bytes + kBlobOffsetPayloadSize);
  h.checksum = ReadU64(bytes + kBlobOffsetChecksum);

  if (h.format_version < kBlobFormatVersionMin || h.format_version > kBlobFormatVersion) {
    ET_LOG(Error,
           "executorch_trt: blob format_version is %" PRIu32
           ", this runtime reads "
           "versions %" PRIu32 " to %" PRIu32
           "; re-export the model with a matching executorch-trt, or "
           "update the runtime.",
           h.format_version, kBlobFormatVersionMin, kBlobFormatVersion);
    return Error::DelegateInvalidCompatibility;
  }
  const uint64_t unknown = h.required_features & ~kBlobKnownFeatures;
  if (unknown != 0) {
    ET_LOG(Error,
           "executorch_trt: blob requires feature bits 0x%" PRIx64
           " that this runtime "
           "does not know (known: 0x%" PRIx64 "); update the runtime or re-export.",
           unknown, kBlobKnownFeatures);
    return Error::DelegateInvalidCompatibility;
  }
  const uint32_t reserved = ReadU32(bytes + kBlobOffsetReserved);
  if (reserved != 0) {
    ET_LOG(Error,
           "executorch_trt: blob reserved field at offset 12 is 0x%08" PRIx32
           ", expected 0; the blob is corrupted; re-export.",
           reserved);
    return Error::InvalidProgram;
  }
  if (h.header_size < kBlobMinHeaderSize || h.header_size > size) {
    ET_LOG(Error,
           "executorch_trt: blob header_size is %" PRIu32 ", expected >= %" PRIu32
           " and <= the blob size %zu; the blob is corrupt.",
           h.header_size, kBlobMinHeaderSize, size);
    return Error::InvalidProgram;
  }
  if (!SectionFits("metadata", h.metadata_offset, h.metadata_size, h.header_size, size) ||
      !SectionFits("payload", h.payload_offset, h.payload_size, h.header_size, size)) {
    return Error::InvalidProgram;
  }
  if (h.payload_offset % kBlobPayloadAlignment != 0) {
    ET_LOG(Error,
           "executorch_trt: blob payload_offset %" PRIu64 " is not %" PRIu64
           "-byte aligned; the blob writer is broken, re-export it.",
           h.payload_offset, kBlobPayloadAlignment);
    return Error::InvalidProgram;
  }
  Error err = VerifyChecksum(h, bytes);
  if (err != Error::Ok) {
    return err;
  }
  return h;
}

std::string_view BlobHeader::Metadata(const void* blob) const {
  return std::string_view(static_cast<const char*>(blob) + metadata_offset,
                          static_cast<size_t>(metadata_size));
}

const uint8_t* BlobHeader::Payload(const void* blob) const {
  return static_cast<const uint8_t*>(blob) + payload_offset;
}

}  // namespace executorch_trt
