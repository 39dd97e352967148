// Copyright (c) executorch-trt authors.

#include "examples/pte_file.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/common/little_endian.h"

namespace executorch_trt::examples {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;

constexpr size_t kExtendedHeaderOffset = 8;
constexpr size_t kExtendedHeaderMinLength = 24;
constexpr size_t kHeadBytes = kExtendedHeaderOffset + kExtendedHeaderMinLength;

}  // namespace

AlignedBytes::AlignedBytes(size_t size)
    : storage_(
          new std::max_align_t[(size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]),
      size_(size) {}

AlignedBytes::AlignedBytes(const uint8_t* data, size_t size) : AlignedBytes(size) {
  if (size != 0) std::memcpy(storage_.get(), data, size);
}

Result<PteFile> PteFile::Open(const std::string& path, const std::string& prefix,
                              std::string* error) {
  PteFile file(std::fopen(path.c_str(), "rb"));
  if (file.file_ == nullptr) {
    *error = path + ": cannot open";
    return Error::AccessFailed;
  }
  const long end =
      std::fseek(file.file_.get(), 0, SEEK_END) == 0 ? std::ftell(file.file_.get()) : -1;
  if (end < 0) {
    *error = path + ": cannot read (not a regular file?)";
    return Error::AccessFailed;
  }
  file.file_size_ = static_cast<uint64_t>(end);
  uint8_t head[kHeadBytes] = {};
  const size_t head_size = static_cast<size_t>(std::min<uint64_t>(file.file_size_, kHeadBytes));
  if (!file.ReadAt(0, head, head_size)) {
    *error = path + ": cannot read";
    return Error::AccessFailed;
  }
  // With an extended header the flatbuffer is its first `program_size` bytes and the segments
  // (e.g. weights) start at `segment_base`; without one, the whole file is the flatbuffer.
  file.program_size_ = file.file_size_;
  if (head_size == kHeadBytes && std::memcmp(head + kExtendedHeaderOffset, "eh00", 4) == 0) {
    const uint8_t* header = head + kExtendedHeaderOffset;
    const uint32_t length = ReadU32(header + 4);
    file.program_size_ = ReadU64(header + 8);
    file.segment_base_ = ReadU64(header + 16);
    if (length < kExtendedHeaderMinLength || file.program_size_ < 8 ||
        file.program_size_ > file.file_size_) {
      *error = prefix + "corrupt extended header (length " + std::to_string(length) +
               ", program size " + std::to_string(file.program_size_) + ", file " +
               std::to_string(file.file_size_) + " bytes)";
      return Error::InvalidProgram;
    }
  }
  return file;
}

bool PteFile::ReadAt(uint64_t offset, uint8_t* out, size_t size) {
  if (size == 0) return true;
  if (offset > static_cast<uint64_t>(INT64_MAX) ||
      std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0) {
    return false;
  }
  return std::fread(out, 1, size, file_.get()) == size;
}

bool VerifiesAsProgram(const uint8_t* data, size_t size) {
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, fb::ProgramIdentifier())) {
    return false;
  }
  flatbuffers::Verifier verifier(data, std::min<size_t>(size, kMaxFlatbufferSize - 1));
  return fb::VerifyProgramBuffer(verifier);
}

}  // namespace executorch_trt::examples
