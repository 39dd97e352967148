// Tests for examples/plan_copies: the write-backs read off real programs' execution plans
// (the in-place example, the copy-back and unplanned variants, a program with a loop and
// et_copy_index), and corrupt input rejected without reading past the buffer.
#include "examples/plan_copies.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/runtime/executor/program.h>
#include <gtest/gtest.h>

#include "examples/reference.h"
#include "tests/examples/pte_test_files.h"

namespace executorch_trt::examples {
namespace {

using executorch::runtime::Error;

ProgramCopies MustRead(const std::string& path) {
  std::string error;
  auto copies = ReadProgramCopies(path, &error);
  EXPECT_TRUE(copies.ok()) << error;
  return copies.ok() ? *copies : ProgramCopies{};
}

// Parses an exact-size heap copy of `data[0, n)` so that any read past it is caught by ASan.
executorch::runtime::Result<ProgramCopies> ParseCopyOf(const uint8_t* data, size_t n,
                                                       std::string* error) {
  std::vector<uint8_t> exact(data, data + n);
  return ParseProgramCopies(exact.data(), exact.size(), "test.pte", error);
}

bool SameCopies(const ProgramCopies& a, const ProgramCopies& b) {
  if (a.methods.size() != b.methods.size()) return false;
  for (size_t m = 0; m < a.methods.size(); ++m) {
    const auto& x = a.methods[m];
    const auto& y = b.methods[m];
    if (x.method != y.method || x.exact != y.exact || x.copies.size() != y.copies.size())
      return false;
    for (size_t c = 0; c < x.copies.size(); ++c) {
      if (x.copies[c].op != y.copies[c].op ||
          x.copies[c].destination_name != y.copies[c].destination_name ||
          x.copies[c].destination_value != y.copies[c].destination_value ||
          x.copies[c].bytes != y.copies[c].bytes) {
        return false;
      }
    }
  }
  return true;
}

TEST(PlanCopiesTest, InPlaceExampleWritesNothingBack) {
  const ProgramCopies copies = MustRead(kKvCacheDecodePte);
  EXPECT_EQ(copies.MethodNames(), "decode, prefill");
  for (const char* method : {"prefill", "decode"}) {
    const MethodCopies* m = copies.Find(method);
    ASSERT_NE(m, nullptr) << method;
    EXPECT_TRUE(m->exact) << method;
    EXPECT_EQ(m->BytesPerCall(), 0u)
        << method << " writes back " << m->copies.size() << " buffers, e.g. "
        << (m->copies.empty() ? "" : m->copies[0].DestinationLabel());
  }
  EXPECT_EQ(copies.Find("forward"), nullptr);
}

// kv_cache="copy_back" and in-place aliases without the in-place planning: ExecuTorch writes
// every cache back with aten::copy_ on every call of both methods, plus the step counters.
void ExpectEveryCacheWrittenBack(const char* program) {
  Reference ref;
  std::string error;
  ASSERT_TRUE(LoadReference(kKvCacheDecodeReference, &ref, &error)) << error;
  const ProgramCopies copies = MustRead(program);
  for (const char* method : {"prefill", "decode"}) {
    const MethodCopies* m = copies.Find(method);
    ASSERT_NE(m, nullptr) << program << " " << method;
    EXPECT_TRUE(m->exact);
    uint64_t cache_bytes = 0;
    for (const auto& cache : ref.caches) {
      int found = 0;
      for (const auto& copy : m->copies) {
        if (copy.destination_name != cache.name) continue;
        ++found;
        EXPECT_EQ(copy.op, "aten::copy_");
        EXPECT_EQ(copy.bytes, static_cast<uint64_t>(cache.numel()) * sizeof(float)) << cache.name;
        EXPECT_EQ(copy.DestinationLabel(), "'" + cache.name + "'");
      }
      EXPECT_EQ(found, 1) << program << " " << method << ": write-backs of " << cache.name;
      cache_bytes += static_cast<uint64_t>(cache.numel()) * sizeof(float);
    }
    // The rest is the HF wrapper's 8-byte cumulative_length_<layer> counters.
    EXPECT_EQ(m->BytesPerCall(), cache_bytes + 8 * (ref.caches.size() / 2))
        << program << " " << method;
    for (const auto& copy : m->copies) EXPECT_FALSE(copy.destination_name.empty());
  }
}

TEST(PlanCopiesTest, CopyBackProgramWritesEveryCacheBack) {
  ExpectEveryCacheWrittenBack(kCopyBackPte);
}

TEST(PlanCopiesTest, InPlaceWithoutPlanningWritesEveryCacheBack) {
  ExpectEveryCacheWrittenBack(kUnplannedPte);
}

// torch.map: a loop (not exact), et_copy_index counted by what it copies (one row of
// 3 floats into the [5, 3] output, which has no name), then the write-back of `state` [2, 3].
TEST(PlanCopiesTest, LoopAndEtCopyIndex) {
  const ProgramCopies copies = MustRead(kMapPte);
  const MethodCopies* m = copies.Find("forward");
  ASSERT_NE(m, nullptr) << copies.MethodNames();
  EXPECT_FALSE(m->exact);
  ASSERT_EQ(m->copies.size(), 2u);
  EXPECT_EQ(m->copies[0].op, "executorch_prim::et_copy_index");
  EXPECT_EQ(m->copies[0].bytes, 3 * sizeof(float));
  EXPECT_EQ(m->copies[0].destination_name, "");
  EXPECT_GE(m->copies[0].destination_value, 0);
  EXPECT_EQ(m->copies[0].DestinationLabel(),
            "value #" + std::to_string(m->copies[0].destination_value) + " (unnamed)");
  EXPECT_EQ(m->copies[1].op, "aten::copy_");
  EXPECT_EQ(m->copies[1].destination_name, "state");
  EXPECT_EQ(m->copies[1].bytes, 2 * 3 * sizeof(float));
  EXPECT_LT(m->copies[0].instruction, m->copies[1].instruction);
}

// Every prefix of the flatbuffer: an error, or (if everything the plan needs lies in the
// prefix) exactly the full result. Never a read past the prefix.
TEST(PlanCopiesTest, EveryTruncationIsRejectedOrIdentical) {
  const std::vector<uint8_t> pte = ReadAll(kCopyBackPte);
  ASSERT_FALSE(pte.empty());
  const size_t size = ProgramSize(pte);
  std::string error;
  auto full = ParseCopyOf(pte.data(), size, &error);
  ASSERT_TRUE(full.ok()) << error;
  size_t rejected = 0;
  for (size_t n = 0; n < size; ++n) {
    error.clear();
    auto copies = ParseCopyOf(pte.data(), n, &error);
    if (copies.ok()) {
      EXPECT_TRUE(SameCopies(*copies, *full)) << "prefix of " << n << " bytes";
    } else {
      ++rejected;
      EXPECT_EQ(copies.error(), Error::InvalidProgram);
      EXPECT_EQ(error.rfind("test.pte: cannot read the execution plan: ", 0), 0u) << error;
    }
  }
  EXPECT_GT(rejected, size / 2);
}

// Every byte of the flatbuffer flipped in three ways: never a crash or a read past the buffer
// (run under ASan to see the latter); the result, when there is one, is well formed.
TEST(PlanCopiesTest, CorruptBytesNeverCrash) {
  std::vector<uint8_t> pte = ReadAll(kCopyBackPte);
  ASSERT_FALSE(pte.empty());
  const size_t size = ProgramSize(pte);
  size_t rejected = 0;
  for (size_t i = 0; i < size; ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      pte[i] ^= flip;
      std::string error;
      auto copies = ParseCopyOf(pte.data(), size, &error);
      if (!copies.ok()) {
        ++rejected;
        EXPECT_FALSE(error.empty());
      } else {
        EXPECT_FALSE(copies->methods.empty());
      }
      pte[i] ^= flip;
    }
  }
  EXPECT_GT(rejected, 0u);
}

// A caller's buffer at an odd address: the same result (the parser copies it to aligned
// memory before the verifier and the generated accessors load from it).
TEST(PlanCopiesTest, UnalignedBufferGivesTheSameResult) {
  const std::vector<uint8_t> pte = ReadAll(kCopyBackPte);
  ASSERT_FALSE(pte.empty());
  const size_t size = ProgramSize(pte);
  std::vector<uint8_t> shifted(size + 1);
  std::memcpy(shifted.data() + 1, pte.data(), size);
  std::string error;
  auto unaligned = ParseProgramCopies(shifted.data() + 1, size, "test.pte", &error);
  ASSERT_TRUE(unaligned.ok()) << error;
  EXPECT_TRUE(SameCopies(*unaligned, MustRead(kCopyBackPte)));
}

// The root offset pointing past the end: flatbuffers' verifier rejects it before any access.
TEST(PlanCopiesTest, VerifierRejectsAnOffsetOutOfRange) {
  std::vector<uint8_t> pte = ReadAll(kCopyBackPte);
  ASSERT_FALSE(pte.empty());
  const size_t size = ProgramSize(pte);
  for (int i = 0; i < 4; ++i) pte[i] = static_cast<uint8_t>((size + 64) >> (8 * i));
  std::string error;
  auto copies = ParseCopyOf(pte.data(), size, &error);
  ASSERT_FALSE(copies.ok());
  EXPECT_EQ(copies.error(), Error::InvalidProgram);
  EXPECT_NE(
      error.find("test.pte: cannot read the execution plan: the program flatbuffer (" +
                 std::to_string(size) + " bytes) fails verification against ExecuTorch's schema"),
      std::string::npos)
      << error;
}

// plan_copies carries its own FlatBuffers (Debian's 2.0.8) and code generated from ExecuTorch's
// schema; libexecutorch.so exports the same inline functions built from its own FlatBuffers
// release. Linked into one binary (this test is linked statically, as the runner is), ours
// must not replace ExecuTorch's: its verifier must still accept a good program. (With the
// symbols exported, ExecuTorch's Program::Verify ran our 2.0.8 code on its own Verifier and
// rejected every program.)
TEST(PlanCopiesTest, ExecuTorchStillVerifiesPrograms) {
  ASSERT_TRUE(MustRead(kKvCacheDecodePte).Find("decode") !=
              nullptr);  // our reader is linked and used
  auto loader = executorch::extension::FileDataLoader::from(kKvCacheDecodePte);
  ASSERT_TRUE(loader.ok());
  auto program = executorch::runtime::Program::load(
      &loader.get(), executorch::runtime::Program::Verification::InternalConsistency);
  EXPECT_TRUE(program.ok()) << "ExecuTorch's verifier rejects " << kKvCacheDecodePte << ": error 0x"
                            << std::hex << static_cast<uint32_t>(program.error());
}

TEST(PlanCopiesTest, NotAProgram) {
  std::string error;
  const uint8_t json[] = "{\"format\": \"not a program\"}";
  auto not_a_program = ParseCopyOf(json, sizeof(json), &error);
  ASSERT_FALSE(not_a_program.ok());
  EXPECT_EQ(not_a_program.error(), Error::InvalidProgram);
  EXPECT_NE(error.find("file identifier 'rmat', expected 'ET12'"), std::string::npos) << error;

  error.clear();
  auto too_short = ParseCopyOf(json, 5, &error);
  ASSERT_FALSE(too_short.ok());
  EXPECT_NE(error.find("only 5 bytes"), std::string::npos) << error;
}

TEST(PlanCopiesTest, FileErrors) {
  std::string error;
  auto missing = ReadProgramCopies(TempPath("no_such.pte"), &error);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), Error::AccessFailed);
  EXPECT_NE(error.find("no_such.pte: cannot open"), std::string::npos) << error;

  // Cut inside the flatbuffer: the extended header promises more than the file has.
  const std::vector<uint8_t> pte = ReadAll(kKvCacheDecodePte);
  ASSERT_GT(pte.size(), 200u);
  const std::string cut_path = WriteTemp("cut.pte", pte.data(), 100);
  error.clear();
  auto cut = ReadProgramCopies(cut_path, &error);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error(), Error::InvalidProgram);
  EXPECT_NE(error.find("cut.pte: cannot read the execution plan: corrupt extended header"),
            std::string::npos)
      << error;

  // The whole flatbuffer, none of the segments: the plan is all there.
  const std::string head_path = WriteTemp("head.pte", pte.data(), ProgramSize(pte));
  error.clear();
  auto head = ReadProgramCopies(head_path, &error);
  ASSERT_TRUE(head.ok()) << error;
  EXPECT_TRUE(SameCopies(*head, MustRead(kKvCacheDecodePte)));

  const std::string empty_path = WriteTemp("empty.pte", pte.data(), 0);
  error.clear();
  auto empty = ReadProgramCopies(empty_path, &error);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(error.find("empty.pte: cannot read the execution plan: only 0 bytes"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace executorch_trt::examples
