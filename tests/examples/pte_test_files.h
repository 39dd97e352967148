// Copyright (c) executorch-trt authors.
//
// pte_test_files.h: .pte bytes for the tests of the plan readers (plan_copies,
// plan_delegates): a file's bytes, its program flatbuffer's size, and files written to the
// test's temporary directory. Failures are reported through GoogleTest's EXPECT_*.

#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace executorch_trt::examples {

// The programs these tests read, runfiles-relative (bazel test runs in the runfiles root):
// the example's decoder (in place, its weights in segments) and its other exports, and the
// forms of one small model (//tests/examples:delegate_forms_program) and broken copies of it.
inline constexpr const char* kKvCacheDecodePte = "examples/kv_cache_decode.pte";
inline constexpr const char* kKvCacheDecodeReference = "examples/kv_cache_decode_reference.json";
inline constexpr const char* kCopyBackPte = "examples/kv_cache_copy_back.pte";
inline constexpr const char* kUnplannedPte = "examples/kv_cache_inplace_without_planning.pte";
inline constexpr const char* kMapPte = "tests/examples/map.pte";
inline constexpr const char* kInlinePte = "tests/examples/delegate_inline.pte";
inline constexpr const char* kNoXnnpackPte = "tests/examples/delegate_no_xnnpack.pte";
inline constexpr const char* kXnnpackOnlyPte = "tests/examples/xnnpack_only.pte";
inline constexpr const char* kPlainPte = "tests/examples/plain.pte";
inline constexpr const char* kPlanCutPte = "tests/examples/plan_cut.pte";
inline constexpr const char* kScribbledPte = "tests/examples/scribbled.pte";

// The bytes of the file at `path` (empty if it does not open).
inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::vector<uint8_t> bytes;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return bytes;
  uint8_t chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
  return bytes;
}

// The program flatbuffer's size: the extended header's program size (all these files have one).
inline size_t ProgramSize(const std::vector<uint8_t>& pte) {
  EXPECT_GE(pte.size(), 24u);
  EXPECT_EQ(std::memcmp(pte.data() + 8, "eh00", 4), 0);
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= uint64_t{pte[16 + i]} << (8 * i);
  EXPECT_LE(size, pte.size());
  return static_cast<size_t>(size);
}

// `name` in the test's temporary directory ($TEST_TMPDIR, else /tmp).
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// Writes `n` bytes at `data` to TempPath(`name`); returns the path.
inline std::string WriteTemp(const std::string& name, const uint8_t* data, size_t n) {
  const std::string path = TempPath(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f != nullptr) {
    EXPECT_EQ(std::fwrite(data, 1, n, f), n);
    std::fclose(f);
  }
  return path;
}

inline std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  return WriteTemp(name, bytes.data(), bytes.size());
}

}  // namespace executorch_trt::examples
