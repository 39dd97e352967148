// Tests for examples/plan_delegates: the delegates and engines read off real programs (blobs in
// segments and inline, a portable engine with and without nested XNNPACK, plain ExecuTorch with
// and without an XnnpackBackend delegate), a file cut inside a blob and a corrupted blob
// reported per delegate, unreadable files rejected, and the texts the runners print.
#include "examples/plan_delegates.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

#include "tests/examples/pte_test_files.h"

namespace executorch_trt::examples {
namespace {

using executorch::runtime::Error;

constexpr const char* kPortableWithXnnpack =
    "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program with XNNPACK, on "
    "the CPU)";

// Offset of the first delegate blob ("ETRT") in `pte[from, to)`, or `to` if there is none.
size_t FindBlob(const std::vector<uint8_t>& pte, size_t from, size_t to) {
  const char magic[] = "ETRT";
  auto it = std::search(pte.begin() + from, pte.begin() + to, magic, magic + 4);
  return static_cast<size_t>(it - pte.begin());
}

ProgramDelegates MustRead(const std::string& path) {
  std::string error;
  auto delegates = ReadProgramDelegates(path, &error);
  EXPECT_TRUE(delegates.ok()) << error;
  return delegates.ok() ? *delegates : ProgramDelegates{};
}

class PlanDelegatesTest : public ::testing::Test {
 protected:
  // The blob readers log through ExecuTorch's PAL, which must be initialised first.
  static void SetUpTestSuite() { executorch::runtime::runtime_init(); }
};

TEST_F(PlanDelegatesTest, BlobsInSegments) {
  // ExecuTorch's default: no blob inside the flatbuffer, both after it.
  const std::vector<uint8_t> pte = ReadAll(kKvCacheDecodePte);
  const size_t program_size = ProgramSize(pte);
  EXPECT_EQ(FindBlob(pte, 0, program_size), program_size);
  EXPECT_LT(FindBlob(pte, program_size, pte.size()), pte.size());

  const ProgramDelegates program = MustRead(kKvCacheDecodePte);
  ASSERT_EQ(program.methods.size(), 2u);
  for (const char* name : {"prefill", "decode"}) {
    const MethodDelegates* method = program.Find(name);
    ASSERT_NE(method, nullptr) << name;
    ASSERT_EQ(method->delegates.size(), 1u) << name;
    const PlanDelegate& d = method->delegates[0];
    EXPECT_EQ(d.backend, "TensorRTBackend");
    EXPECT_EQ(d.engine, "portable");
    EXPECT_EQ(d.nested_backends, std::vector<std::string>{"XnnpackBackend"});
    EXPECT_EQ(d.problem, "");
    EXPECT_EQ(d.EngineLabel(), "portable, CPU");
    EXPECT_EQ(method->Describe(), kPortableWithXnnpack) << name;
  }
  EXPECT_EQ(program.EnginesRun({"prefill", "decode"}), "engine: portable, CPU");
  EXPECT_EQ(program.Find("forward"), nullptr);
}

TEST_F(PlanDelegatesTest, BlobInline) {
  // extract_delegate_segments=False: the blob is inside the flatbuffer.
  const std::vector<uint8_t> pte = ReadAll(kInlinePte);
  EXPECT_LT(FindBlob(pte, 0, ProgramSize(pte)), ProgramSize(pte));

  const ProgramDelegates program = MustRead(kInlinePte);
  ASSERT_EQ(program.methods.size(), 1u);
  EXPECT_EQ(program.methods[0].method, "forward");
  EXPECT_EQ(program.methods[0].Describe(), kPortableWithXnnpack);
  EXPECT_EQ(program.EnginesRun({"forward"}), "engine: portable, CPU");
}

TEST_F(PlanDelegatesTest, PortableEngineWithoutNestedXnnpack) {
  const ProgramDelegates program = MustRead(kNoXnnpackPte);
  ASSERT_EQ(program.methods.size(), 1u);
  ASSERT_EQ(program.methods[0].delegates.size(), 1u);
  EXPECT_EQ(program.methods[0].delegates[0].nested_backends, std::vector<std::string>{});
  EXPECT_EQ(program.methods[0].Describe(),
            "1 TensorRTBackend delegate, engine portable (nested ExecuTorch program on "
            "ExecuTorch's kernels, on the CPU)");
  EXPECT_EQ(program.EnginesRun({"forward"}), "engine: portable, CPU");
}

TEST_F(PlanDelegatesTest, OtherBackendHasNoEngine) {
  const ProgramDelegates program = MustRead(kXnnpackOnlyPte);
  ASSERT_EQ(program.methods.size(), 1u);
  const MethodDelegates& forward = program.methods[0];
  ASSERT_FALSE(forward.delegates.empty());
  for (const PlanDelegate& d : forward.delegates) {
    EXPECT_EQ(d.backend, "XnnpackBackend");
    EXPECT_EQ(d.engine, "");
    EXPECT_EQ(d.EngineDescription(), "");
  }
  const size_t n = forward.delegates.size();
  EXPECT_EQ(forward.Describe(),
            std::to_string(n) + " XnnpackBackend delegate" + (n == 1 ? "" : "s"));
  EXPECT_EQ(program.EnginesRun({"forward"}), "no TensorRTBackend delegate");
}

TEST_F(PlanDelegatesTest, NoDelegate) {
  const ProgramDelegates program = MustRead(kPlainPte);
  ASSERT_EQ(program.methods.size(), 1u);
  EXPECT_EQ(program.methods[0].Describe(), "no delegate (ExecuTorch's CPU kernels)");
  EXPECT_EQ(program.EnginesRun({"forward"}), "no TensorRTBackend delegate");
}

TEST_F(PlanDelegatesTest, SegmentPastTheEndIsReportedPerDelegate) {
  // Cut inside the first blob's segment: the flatbuffer is whole, no blob is (ExecuTorch's
  // loader rejects the file; the report must say the engine is unknown, not guess one).
  std::vector<uint8_t> pte = ReadAll(kKvCacheDecodePte);
  const size_t blob = FindBlob(pte, ProgramSize(pte), pte.size());
  ASSERT_LT(blob + 100, pte.size());
  pte.resize(blob + 100);
  const ProgramDelegates program = MustRead(WriteTemp("cut_in_a_blob.pte", pte));
  ASSERT_EQ(program.methods.size(), 2u);
  for (const MethodDelegates& method : program.methods) {
    ASSERT_EQ(method.delegates.size(), 1u);
    const PlanDelegate& d = method.delegates[0];
    EXPECT_EQ(d.engine, "");
    EXPECT_NE(d.problem.find("lies past the end of the file"), std::string::npos) << d.problem;
    EXPECT_EQ(method.Describe().rfind("1 TensorRTBackend delegate, engine unknown (segment ", 0),
              0u)
        << method.Describe();
  }
  EXPECT_EQ(program.EnginesRun({"prefill", "decode"}), "engine: unknown");
}

TEST_F(PlanDelegatesTest, CorruptedBlobIsReportedPerDelegate) {
  std::vector<uint8_t> pte = ReadAll(kKvCacheDecodePte);
  const size_t blob = FindBlob(pte, ProgramSize(pte), pte.size());
  ASSERT_LT(blob + 200, pte.size());
  pte[blob + 200] ^= 0xff;  // inside the checksummed metadata or payload
  const ProgramDelegates program = MustRead(WriteTemp("corrupted_blob.pte", pte));
  std::vector<std::string> unknown;
  for (const MethodDelegates& method : program.methods) {
    for (const PlanDelegate& d : method.delegates) {
      if (d.engine.empty()) {
        unknown.push_back(method.method);
        EXPECT_NE(d.problem.find("rejects it"), std::string::npos) << d.problem;
      }
    }
  }
  ASSERT_EQ(unknown.size(), 1u);
  const std::string other = unknown[0] == "prefill" ? "decode" : "prefill";
  EXPECT_EQ(program.EnginesRun({unknown[0], other}), "engines: unknown; portable, CPU");
}

TEST_F(PlanDelegatesTest, UnreadableFilesAreErrors) {
  std::string error;
  auto missing = ReadProgramDelegates("no_such.pte", &error);
  EXPECT_EQ(missing.error(), Error::AccessFailed);
  EXPECT_EQ(error, "no_such.pte: cannot open");
  for (const char* path : {kPlanCutPte, kScribbledPte}) {
    error.clear();
    auto bad = ReadProgramDelegates(path, &error);
    EXPECT_EQ(bad.error(), Error::InvalidProgram) << path;
    EXPECT_EQ(error.rfind(std::string(path) + ": cannot read the program's delegates: ", 0), 0u)
        << error;
  }
}

TEST(PlanDelegateTextTest, EnginesAndGroups) {
  PlanDelegate trt{"TensorRTBackend", "tensorrt", {}, ""};
  PlanDelegate portable{"TensorRTBackend", "portable", {"XnnpackBackend", "OtherBackend"}, ""};
  PlanDelegate xnnpack{"XnnpackBackend", "", {}, ""};
  EXPECT_EQ(trt.EngineDescription(), "engine tensorrt (TensorRT plan, on the GPU)");
  EXPECT_EQ(trt.EngineLabel(), "tensorrt, GPU");
  EXPECT_EQ(portable.EngineDescription(),
            "engine portable (nested ExecuTorch program with XNNPACK and OtherBackend, on the "
            "CPU)");
  EXPECT_EQ(xnnpack.EngineLabel(), "");
  const MethodDelegates method{"decode", {trt, xnnpack, trt}};
  EXPECT_EQ(method.Describe(),
            "2 TensorRTBackend delegates, engine tensorrt (TensorRT plan, on the GPU); 1 "
            "XnnpackBackend delegate");
  const ProgramDelegates program{{method, MethodDelegates{"prefill", {portable}}}};
  EXPECT_EQ(program.EnginesRun({"decode"}), "engine: tensorrt, GPU");
  EXPECT_EQ(program.EnginesRun({"prefill", "decode"}), "engines: portable, CPU; tensorrt, GPU");
  EXPECT_EQ(program.EnginesRun({"encode"}), "no TensorRTBackend delegate");
}

}  // namespace
}  // namespace executorch_trt::examples
