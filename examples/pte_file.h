// Copyright (c) executorch-trt authors.
//
// pte_file.h: a .pte file read the way plan_copies and plan_delegates read it: its extended
// header (where the program flatbuffer ends and the segments begin), byte ranges of the file,
// and the program flatbuffer checked by flatbuffers::Verifier before any accessor reads it.
//
// The program is read with the C++ code Debian's flatc generates at build time from the schema
// in the pinned ExecuTorch wheel (//core/schema:program_schema). libexecutorch.so exports the
// inline functions of its own FlatBuffers release and of its own code generated from this
// schema (flatbuffers::Verifier::*, executorch_flatbuffer::*::Verify) under the same names as
// ours. Exported from a binary, our copies would replace ExecuTorch's at load time and break its
// verifier (every Program::load with InternalConsistency fails); hidden, each side binds to its
// own. So the schema and the inline helpers over its types are hidden.

#pragma once

// Before the hidden region: flatbuffers' asserts must bind to the C library's __assert_fail.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <executorch/runtime/core/result.h>

#pragma GCC visibility push(hidden)
#include <flatbuffers/flatbuffers.h>

#include "core/schema/program_generated.h"

namespace executorch_trt::examples {

namespace fb = executorch_flatbuffer;

// flatbuffers::Verifier asserts that a buffer is smaller than this (32-bit signed offsets).
inline constexpr uint64_t kMaxFlatbufferSize = FLATBUFFERS_MAX_BUFFER_SIZE;

// Optional fields: an absent string is "", an absent vector has no elements.
inline std::string Str(const flatbuffers::String* s) { return s == nullptr ? "" : s->str(); }
template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

}  // namespace executorch_trt::examples

#pragma GCC visibility pop

namespace executorch_trt::examples {

// Bytes in storage aligned as the flatbuffer builder aligns (the generated accessors load
// scalars in place; an arbitrary std::vector<uint8_t> promises no alignment).
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t size);
  AlignedBytes(const uint8_t* data, size_t size);  // a copy of [data, data + size)
  uint8_t* data() { return reinterpret_cast<uint8_t*>(storage_.get()); }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(storage_.get()); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<std::max_align_t[]> storage_;
  size_t size_;
};

// A .pte file open for reading, with its extended header read (ExecuTorch's
// schema/extended_header.h, not in the wheel's SDK: at byte 8, magic "eh00", u32 header length
// (>= 24), u64 program size, u64 segment base offset). Movable, not copyable; closes the file.
// Not thread-safe (one file position).
class PteFile {
 public:
  // Opens `path` and reads its extended header, if it has one. Errors (with *error):
  // Error::AccessFailed, "<path>: cannot open", "<path>: cannot read (not a regular file?)" or
  // "<path>: cannot read"; Error::InvalidProgram, `prefix` + "corrupt extended header (length
  // L, program size P, file F bytes)" for a header whose length is under 24 or whose program
  // size is under 8 or past the end of the file.
  static executorch::runtime::Result<PteFile> Open(const std::string& path,
                                                   const std::string& prefix, std::string* error);

  uint64_t file_size() const { return file_size_; }
  // The program flatbuffer's bytes: the extended header's program size, else the whole file.
  uint64_t program_size() const { return program_size_; }
  // Where the segments start (0 without an extended header: a program without segments).
  uint64_t segment_base() const { return segment_base_; }

  // Reads `size` bytes at `offset` into `out`; false if the file is shorter or a read fails.
  bool ReadAt(uint64_t offset, uint8_t* out, size_t size);

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  explicit PteFile(std::FILE* f) : file_(f) {}

  std::unique_ptr<std::FILE, Closer> file_;
  uint64_t file_size_ = 0;
  uint64_t program_size_ = 0;
  uint64_t segment_base_ = 0;
};

// Whether `size` bytes at `data` (aligned as AlignedBytes aligns) are an ExecuTorch program
// flatbuffer that passes flatbuffers::Verifier against the schema (of at most
// kMaxFlatbufferSize - 1 bytes are verified: what follows is never part of the program).
bool VerifiesAsProgram(const uint8_t* data, size_t size);

}  // namespace executorch_trt::examples
