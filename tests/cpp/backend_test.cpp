// Copyright (c) executorch-trt authors.
//
// End to end: TensorRTBackend over a real blob around a real nested program (generated
// by tests/cpp/testdata/make_kv_testdata.py), through ExecuTorch's Module and through
// the BackendInterface directly. Delegate order (k_cache, x, pos | k_cache_out, y)
// differs from engine order (x, pos, k_cache | y, k_cache_out).
//
// Model: k_cache_out = k_cache with row pos set to 2x+1; y = k_cache_out.sum(dim=1).

#include "core/backend/tensorrt_backend.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/module/module.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/binding/copy_counter.h"
#include "core/blob/blob_header.h"
#include "core/common/little_endian.h"
#include "core/common/runtime_types.h"
#include "core/engine/portable/portable_payload.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::BackendInterface;
using executorch::runtime::DelegateHandle;
using executorch::runtime::FreeableBuffer;
using testing::KvModelStep;
using testing::OwnedTensor;

constexpr int kRows = testing::kKvRows;
constexpr int kDim = testing::kKvDim;

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    backend_ = executorch::runtime::get_backend_class(kTensorRTBackendId);
    ASSERT_NE(backend_, nullptr) << "TensorRTBackend is not registered";
    blob_ = testing::ReadFile(testing::TestDataPath("kv_blob.bin"));
    ASSERT_FALSE(blob_.empty()) << "missing " << testing::TestDataPath("kv_blob.bin");
  }

  Result<DelegateHandle*> Init(const std::vector<uint8_t>& blob) {
    FreeableBuffer processed(blob.data(), blob.size(), nullptr);
    executorch::runtime::BackendInitContext context(nullptr);
    return backend_->init(context, &processed, {});
  }

  Error Execute(DelegateHandle* handle, std::vector<EValue*> args) {
    executorch::runtime::BackendExecutionContext context;
    return backend_->execute(context, handle, Span<EValue*>(args.data(), args.size()));
  }

  // The blob with its metadata JSON replaced (written without a checksum, as an older
  // writer did, unless `features` says otherwise).
  std::vector<uint8_t> WithMetadata(const std::string& metadata, uint64_t features = 0b11) {
    return testing::MakeBlob(metadata, Payload(), features);
  }

  std::vector<uint8_t> Payload() const {
    const uint64_t payload_offset = ReadU64(blob_.data() + kBlobOffsetPayloadOffset);
    return std::vector<uint8_t>(blob_.begin() + payload_offset, blob_.end());
  }

  std::string MetadataText() const {
    const uint64_t offset = ReadU64(blob_.data() + kBlobOffsetMetadataOffset);
    const uint64_t size = ReadU64(blob_.data() + kBlobOffsetMetadataSize);
    return std::string(blob_.begin() + offset, blob_.begin() + offset + size);
  }

  // Runs one decode step (x = 1 2 3 4 at pos 3 into a zero cache) and checks the result.
  void ExpectOneCorrectStep(DelegateHandle* handle) {
    OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
    OwnedTensor<float> x(ScalarType::Float, {1, kDim}, {1, 2, 3, 4});
    OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {3});
    OwnedTensor<float> y(ScalarType::Float, {1, kDim});
    EValue c(cache.tensor()), xe(x.tensor()), pe(pos.tensor()), ye(y.tensor());
    ASSERT_EQ(Execute(handle, {&c, &xe, &pe, &c, &ye}), Error::Ok);
    std::vector<float> expected(kRows * kDim, 0.0f), expected_y;
    KvModelStep(&expected, {1, 2, 3, 4}, 3, &expected_y);
    EXPECT_EQ(cache.data(), expected);
    EXPECT_EQ(y.data(), expected_y);
  }

  BackendInterface* backend_ = nullptr;
  std::vector<uint8_t> blob_;
};

const char kMetaPrefix[] = R"({"engine": "portable",
  "inputs": [{"name": "k_cache", "dtype": "float32", "shape": [1, 8, 4]},
             {"name": "x", "dtype": "float32", "shape": [1, 4]},
             {"name": "pos", "dtype": "int64", "shape": [1]}],
  "outputs": [{"name": "k_cache_out", "dtype": "float32", "shape": [1, 8, 4]},
              {"name": "y", "dtype": "float32", "shape": [1, 4]}],
  "aliased_io": )";

TEST_F(BackendTest, InPlaceWhenTheOutputIsTheCacheValue) {
  Result<DelegateHandle*> handle = Init(blob_);
  ASSERT_TRUE(handle.ok());
  OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
  std::vector<float> expected_cache(kRows * kDim, 0.0f), expected_y;
  EValue cache_ev(cache.tensor());
  float* const storage = cache.ptr();
  const uint64_t copied_before = BytesCopied();
  const std::vector<std::pair<std::vector<float>, int64_t>> steps = {
      {{1, 2, 3, 4}, 3}, {{-1, 0.5f, 10, 0}, 5}, {{2, 2, 2, 2}, 3}};
  for (const auto& [xv, p] : steps) {
    OwnedTensor<float> x(ScalarType::Float, {1, kDim}, xv);
    OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {p});
    OwnedTensor<float> y(ScalarType::Float, {1, kDim});
    EValue x_ev(x.tensor()), pos_ev(pos.tensor()), y_ev(y.tensor());
    // args: k_cache, x, pos | k_cache_out (same value as k_cache), y
    ASSERT_EQ(Execute(handle.get(), {&cache_ev, &x_ev, &pos_ev, &cache_ev, &y_ev}), Error::Ok);
    KvModelStep(&expected_cache, xv, p, &expected_y);
    EXPECT_EQ(cache.data(), expected_cache) << "pos " << p;  // state persists across calls
    EXPECT_EQ(y.data(), expected_y);
    EXPECT_EQ(cache_ev.toTensor().const_data_ptr(), storage);
  }
  EXPECT_EQ(BytesCopied(), copied_before) << "an in-place decode step must copy no bytes";
  backend_->destroy(handle.get());
}

TEST_F(BackendTest, ReflectsIntoASeparateOutputAndCountsTheBytes) {
  Result<DelegateHandle*> handle = Init(blob_);
  ASSERT_TRUE(handle.ok());
  OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim},
                           std::vector<float>(kRows * kDim, 1.0f));
  OwnedTensor<float> cache_out(ScalarType::Float, {1, kRows, kDim});
  OwnedTensor<float> x(ScalarType::Float, {1, kDim}, {1, 2, 3, 4});
  OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {7});
  OwnedTensor<float> y(ScalarType::Float, {1, kDim});
  EValue c(cache.tensor()), co(cache_out.tensor()), xe(x.tensor()), pe(pos.tensor()),
      ye(y.tensor());
  const uint64_t before = BytesCopied();
  ASSERT_EQ(Execute(handle.get(), {&c, &xe, &pe, &co, &ye}), Error::Ok);
  EXPECT_EQ(BytesCopied() - before, 128u);
  EXPECT_EQ(executorch_trt_bytes_copied(), BytesCopied());
  std::vector<float> expected(kRows * kDim, 1.0f), expected_y;
  KvModelStep(&expected, {1, 2, 3, 4}, 7, &expected_y);
  EXPECT_EQ(cache.data(), expected) << "the caller's cache is updated in place";
  EXPECT_EQ(cache_out.data(), expected) << "and reflected into the separate output";
  EXPECT_EQ(y.data(), expected_y);
  backend_->destroy(handle.get());
}

TEST_F(BackendTest, ExecuteRejectsArgumentsThatDoNotMatchThePlan) {
  Result<DelegateHandle*> handle = Init(blob_);
  ASSERT_TRUE(handle.ok());
  OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
  OwnedTensor<float> x(ScalarType::Float, {1, kDim});
  OwnedTensor<int32_t> pos32(ScalarType::Int, {1}, {0});
  OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {0});
  OwnedTensor<float> small_cache(ScalarType::Float, {1, kRows - 1, kDim});
  OwnedTensor<float> y(ScalarType::Float, {1, kDim});
  EValue c(cache.tensor()), xe(x.tensor()), p32(pos32.tensor()), pe(pos.tensor()),
      sc(small_cache.tensor()), ye(y.tensor()), scalar(int64_t{3});
  EXPECT_EQ(Execute(handle.get(), {&c, &xe, &pe, &c}), Error::InvalidArgument);
  EXPECT_EQ(Execute(handle.get(), {&c, &xe, &p32, &c, &ye}), Error::InvalidArgument);
  EXPECT_EQ(Execute(handle.get(), {&sc, &xe, &pe, &sc, &ye}), Error::InvalidArgument);
  EXPECT_EQ(Execute(handle.get(), {&c, &scalar, &pe, &c, &ye}), Error::InvalidArgument);
  EXPECT_EQ(Execute(handle.get(), {&xe, &c, &pe, &c, &ye}), Error::InvalidArgument);
  // Still usable after rejected calls.
  EXPECT_EQ(Execute(handle.get(), {&c, &xe, &pe, &c, &ye}), Error::Ok);
  backend_->destroy(handle.get());
}

TEST_F(BackendTest, InitRejectsInconsistentOrIncompatibleBlobs) {
  // kv_cache_update alias the engine disagrees with (and of the wrong shape).
  EXPECT_EQ(Init(WithMetadata(std::string(kMetaPrefix) +
                              R"([{"output": "k_cache_out", "input": "x",
                                   "kind": "kv_cache_update", "ownership": "caller"}]})"))
                .error(),
            Error::InvalidProgram);
  // Unknown kind.
  EXPECT_EQ(Init(WithMetadata(std::string(kMetaPrefix) +
                              R"([{"output": "k_cache_out", "input": "k_cache",
                                   "kind": "magic", "ownership": "caller"}]})"))
                .error(),
            Error::InvalidProgram);
  // Future format version.
  std::vector<uint8_t> future = blob_;
  testing::PutU32(&future, kBlobOffsetFormatVersion, kBlobFormatVersion + 1);
  EXPECT_EQ(Init(future).error(), Error::DelegateInvalidCompatibility);
  // Truncated.
  std::vector<uint8_t> truncated(blob_.begin(), blob_.end() - 100);
  EXPECT_EQ(Init(truncated).error(), Error::InvalidProgram);
  // A TensorRT plan in a build without TensorRT.
  const std::string trt = R"({"engine": "tensorrt", "inputs": [], "outputs": []})";
  EXPECT_NE(Init(testing::MakeBlob(trt, std::vector<uint8_t>(64, 0))).error(), Error::Ok);
}

TEST_F(BackendTest, RunsThroughModuleWithTheCopyBackPath) {
  // outer_kv.pte: forward(k_cache, x, pos) -> (k_cache_out, y), one delegate call. Its
  // inputs and outputs are memory-planned by the outer program, so the delegate's
  // aliased output is a separate tensor and the update is reflected into it.
  executorch::extension::Module module(testing::TestDataPath("outer_kv.pte"));
  std::vector<float> expected_cache(kRows * kDim, 0.0f), expected_y;
  OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
  for (const auto& [xv, p] :
       std::vector<std::pair<std::vector<float>, int64_t>>{{{1, 2, 3, 4}, 0}, {{5, 6, 7, 8}, 6}}) {
    OwnedTensor<float> x(ScalarType::Float, {1, kDim}, xv);
    OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {p});
    const uint64_t before = BytesCopied();
    auto out = module.forward({EValue(cache.tensor()), EValue(x.tensor()), EValue(pos.tensor())});
    ASSERT_TRUE(out.ok()) << static_cast<int>(out.error());
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ(BytesCopied() - before, 128u);
    KvModelStep(&expected_cache, xv, p, &expected_y);
    const auto& k = (*out)[0].toTensor();
    const auto& y = (*out)[1].toTensor();
    EXPECT_EQ(std::vector<float>(k.const_data_ptr<float>(), k.const_data_ptr<float>() + 32),
              expected_cache);
    EXPECT_EQ(std::vector<float>(y.const_data_ptr<float>(), y.const_data_ptr<float>() + 4),
              expected_y);
    // Thread the cache through the next call, as a caller owning it would.
    std::memcpy(cache.ptr(), k.const_data_ptr<float>(), 128);
  }
}

TEST_F(BackendTest, TheTestDataBlobCarriesAChecksum) {
  Result<BlobHeader> header = BlobHeader::Parse(blob_.data(), blob_.size());
  ASSERT_TRUE(header.ok());
  EXPECT_NE(header->required_features & kBlobFeatureChecksum, 0u);
  EXPECT_NE(header->checksum, 0u);
}

// A one-byte change anywhere in a real blob (header, metadata, portable payload header,
// descriptor, nested program) fails init cleanly: nothing is executed, nothing crashes.
TEST_F(BackendTest, InitRejectsEveryCorruptedByteOfARealBlob) {
  const size_t payload_offset = blob_.size() - Payload().size();
  for (size_t at = 0; at < blob_.size(); ++at) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0xbc}}) {
      std::vector<uint8_t> bad = blob_;
      bad[at] ^= flip;
      Result<DelegateHandle*> handle = Init(bad);
      if (handle.ok()) {
        backend_->destroy(handle.get());
        ADD_FAILURE() << "init accepted the blob with byte " << at << " ^ 0x" << std::hex
                      << int(flip);
        continue;
      }
      if (at >= 64) {  // header bytes may also fail as DelegateInvalidCompatibility
        EXPECT_EQ(handle.error(), Error::InvalidProgram)
            << (at < payload_offset ? "metadata" : "payload") << " byte " << at;
      }
    }
  }
  // The untouched blob still works afterwards.
  Result<DelegateHandle*> handle = Init(blob_);
  ASSERT_TRUE(handle.ok());
  ExpectOneCorrectStep(handle.get());
  backend_->destroy(handle.get());
}

TEST_F(BackendTest, BlobsWithoutTheChecksumFeatureStillRun) {
  // As written by an older exporter: CHECKSUM bit clear, checksum field 0.
  // Then re-sealed with a checksum by the test writer: same result.
  for (uint64_t features : {uint64_t{0b11}, uint64_t{0b111}}) {
    // The engine borrows the blob (the nested program is loaded from it in place), so it
    // must outlive the handle, as ExecuTorch's processed buffer does (ASan found the test
    // passing a temporary).
    const std::vector<uint8_t> blob = WithMetadata(MetadataText(), features);
    Result<DelegateHandle*> handle = Init(blob);
    ASSERT_TRUE(handle.ok()) << "features " << features;
    ExpectOneCorrectStep(handle.get());
    backend_->destroy(handle.get());
  }
}

TEST_F(BackendTest, NestedProgramIsVerifiedWithoutAChecksum) {
  // Without the checksum, the nested program is still loaded with InternalConsistency
  // verification: a flatbuffer offset pointing outside the program is rejected at init.
  std::vector<uint8_t> payload = Payload();
  const uint64_t program_offset = ReadU64(payload.data() + kPortablePayloadOffsetProgramOffset);
  ASSERT_EQ(std::memcmp(payload.data() + program_offset + 4, "ET", 2), 0);
  // The flatbuffer root offset (first 4 bytes of the program): point it past the end.
  testing::PutU32(&payload, program_offset, 0x7ffffff0u);
  EXPECT_EQ(Init(testing::MakeBlob(MetadataText(), payload, 0b11)).error(), Error::InvalidProgram);
}

// The same through ExecuTorch's Module: outer_kv.pte with a byte of its embedded delegate
// blob changed fails to load the method instead of executing the corrupted partition.
TEST_F(BackendTest, ModuleRefusesAProgramWhoseDelegateBlobIsCorrupted) {
  const std::vector<uint8_t> outer = testing::ReadFile(testing::TestDataPath("outer_kv.pte"));
  ASSERT_FALSE(outer.empty());
  auto found = std::search(outer.begin(), outer.end(), blob_.begin(), blob_.end());
  ASSERT_NE(found, outer.end()) << "outer_kv.pte does not embed kv_blob.bin verbatim";
  const size_t blob_at = static_cast<size_t>(found - outer.begin());
  const size_t payload_offset = blob_.size() - Payload().size();
  // Bytes of the metadata, the portable payload header and across the nested program.
  std::vector<size_t> offsets = {70, 100, payload_offset, payload_offset + 20};
  for (size_t at = payload_offset + 64; at < blob_.size(); at += blob_.size() / 16) {
    offsets.push_back(at);
  }
  offsets.push_back(blob_.size() - 1);
  for (size_t at : offsets) {
    std::vector<uint8_t> bad = outer;
    bad[blob_at + at] ^= 0xbc;
    executorch::extension::Module module(
        std::make_unique<executorch::extension::BufferDataLoader>(bad.data(), bad.size()));
    OwnedTensor<float> cache(ScalarType::Float, {1, kRows, kDim});
    OwnedTensor<float> x(ScalarType::Float, {1, kDim}, {1, 2, 3, 4});
    OwnedTensor<int64_t> pos(ScalarType::Long, {1}, {3});
    auto out = module.forward({EValue(cache.tensor()), EValue(x.tensor()), EValue(pos.tensor())});
    EXPECT_FALSE(out.ok()) << "blob byte " << at << " changed, yet forward ran";
  }
}

}  // namespace
}  // namespace executorch_trt
