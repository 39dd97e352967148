// Copyright (c) executorch-trt authors.
//
// CheckNestedProgram (core/engine/nested_program_checks.h): every nested program the exporter
// writes passes (the test blob's and every portable partition of the example programs, XNNPACK
// delegates included), and the nested programs of the inputs the fuzzers crashed or exhausted
// memory with (tests/fuzz/regressions/) are rejected before anything is loaded or run.

#include "core/engine/nested_program_checks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <executorch/runtime/platform/runtime.h>

#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "core/engine/portable_payload.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;

constexpr const char kMethod[] = "forward";

// The nested program of a portable payload.
std::vector<uint8_t> ProgramOfPayload(const uint8_t* payload, size_t size) {
  auto parsed = PortablePayload::Parse(payload, size);
  EXPECT_TRUE(parsed.ok()) << "not a portable payload";
  if (!parsed.ok()) return {};
  return std::vector<uint8_t>(parsed->program, parsed->program + parsed->program_size);
}

// The nested program of a blob written by MakeBlob / make_kv_testdata.py (metadata at 64,
// payload last), after recomputing its checksum as the backend fuzzer does.
std::vector<uint8_t> ProgramOfBlob(std::vector<uint8_t> blob) {
  testing::ResealBlob(&blob);
  auto header = BlobHeader::Parse(blob.data(), blob.size());
  EXPECT_TRUE(header.ok()) << "not a blob";
  if (!header.ok()) return {};
  return ProgramOfPayload(header->Payload(blob.data()), header->payload_size);
}

// The nested programs of every portable delegate blob embedded in a .pte (blobs are stored
// verbatim: found by their magic and a header that parses, checksum included).
std::vector<std::vector<uint8_t>> NestedProgramsIn(const std::vector<uint8_t>& pte) {
  std::vector<std::vector<uint8_t>> programs;
  for (size_t at = 0; at + kBlobMinHeaderSize <= pte.size(); ++at) {
    if (std::memcmp(pte.data() + at, kBlobMagic, sizeof(kBlobMagic)) != 0) continue;
    auto header = BlobHeader::Parse(pte.data() + at, pte.size() - at);
    if (!header.ok()) continue;
    auto metadata = DelegateMetadata::Parse(header->Metadata(pte.data() + at),
                                            header->required_features, header->format_version);
    if (!metadata.ok() || metadata->engine != EngineKind::kPortable) continue;
    programs.push_back(ProgramOfPayload(header->Payload(pte.data() + at), header->payload_size));
  }
  return programs;
}

class NestedProgramChecksTest : public ::testing::Test {
 protected:
  void SetUp() override { executorch::runtime::runtime_init(); }
};

TEST_F(NestedProgramChecksTest, AcceptsTheTestProgram) {
  const std::vector<uint8_t> pte = testing::ReadFile(testing::TestDataPath("nested_kv.pte"));
  ASSERT_FALSE(pte.empty());
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size(), kMethod), Error::Ok);
  // The same program inside the real blob.
  const std::vector<uint8_t> from_blob =
      ProgramOfBlob(testing::ReadFile(testing::TestDataPath("kv_blob.bin")));
  EXPECT_EQ(from_blob, pte);
}

TEST_F(NestedProgramChecksTest, AcceptsEveryPartitionOfTheExamplePrograms) {
  for (const char* path : {"examples/kv_cache_decode.pte", "examples/cross_attn_decode.pte"}) {
    const std::vector<uint8_t> pte = testing::ReadFile(path);
    ASSERT_FALSE(pte.empty()) << "missing " << path;
    const std::vector<std::vector<uint8_t>> programs = NestedProgramsIn(pte);
    EXPECT_GE(programs.size(), 2u) << path << ": expected a partition per method";
    for (size_t i = 0; i < programs.size(); ++i) {
      EXPECT_EQ(CheckNestedProgram(programs[i].data(), programs[i].size(), kMethod), Error::Ok)
          << path << ", partition " << i;
    }
  }
}

TEST_F(NestedProgramChecksTest, RejectsAKernelCallPastTheOperatorTable) {
  // backend_fuzzer: one byte of instruction 4's op_index changed (3 -> 0x08000003); ExecuTorch
  // loaded the method and segfaulted calling the kernel at execute.
  const std::vector<uint8_t> program = ProgramOfBlob(
      testing::ReadFile("tests/fuzz/regressions/backend_fuzzer/op_index_past_operator_table.bin"));
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsAPlannedBufferNoTensorNeeds) {
  // portable_payload_fuzzer: a planned buffer size changed to 20 GiB, which the engine
  // allocated at init.
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/planned_buffer_of_20_gib.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsATensorWhoseStridesOverflowInt32) {
  // portable_payload_fuzzer: an input's sizes changed so that 581 * 1347699976 elements lie
  // behind its outer dimension; computing its contiguous strides overflowed int32 (UBSan).
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/strides_overflow_int32.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsAnInstructionWithoutItsArguments) {
  // portable_payload_fuzzer (against the first version of these checks): an instruction
  // whose union type says KernelCall but whose table is absent; reading it was a null
  // member call (UBSan).
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/kernel_call_without_table.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsMisalignedPlannedBufferSizes) {
  // portable_payload_fuzzer: the offset of the int64 buffer-size vector moved by 4 bytes;
  // flatbuffers' verifier accepts it (it aligns the length only) and reading it was a
  // misaligned load (UBSan), in the checks and in ExecuTorch's own MethodMeta alike.
  const std::vector<uint8_t> payload = testing::ReadFile(
      "tests/fuzz/regressions/portable_payload_fuzzer/misaligned_buffer_sizes.bin");
  ASSERT_FALSE(payload.empty());
  const std::vector<uint8_t> program = ProgramOfPayload(payload.data(), payload.size());
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(CheckNestedProgram(program.data(), program.size(), kMethod), Error::InvalidProgram);
}

TEST_F(NestedProgramChecksTest, RejectsWhatIsNotAProgramWithThatMethod) {
  const std::vector<uint8_t> pte = testing::ReadFile(testing::TestDataPath("nested_kv.pte"));
  ASSERT_FALSE(pte.empty());
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size(), "decode"), Error::InvalidProgram);
  EXPECT_EQ(CheckNestedProgram(nullptr, 0, kMethod), Error::InvalidProgram);
  const std::vector<uint8_t> garbage(64, 0x5a);
  EXPECT_EQ(CheckNestedProgram(garbage.data(), garbage.size(), kMethod), Error::InvalidProgram);
  // Truncated: the flatbuffer's tables reach past the end.
  EXPECT_EQ(CheckNestedProgram(pte.data(), pte.size() / 2, kMethod), Error::InvalidProgram);
  // Unaligned storage is handled (copied), not misread.
  std::vector<uint8_t> shifted(pte.size() + 1);
  std::memcpy(shifted.data() + 1, pte.data(), pte.size());
  EXPECT_EQ(CheckNestedProgram(shifted.data() + 1, pte.size(), kMethod), Error::Ok);
}

}  // namespace
}  // namespace executorch_trt
