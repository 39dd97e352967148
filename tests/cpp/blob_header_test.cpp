// Copyright (c) executorch-trt authors.
//
// BlobHeader fails closed on every malformed or incompatible header.

#include "core/blob/blob_header.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using testing::MakeBlob;
using testing::PutU32;
using testing::PutU64;

const std::string kMeta = R"({"engine": "portable", "inputs": [], "outputs": []})";
const std::vector<uint8_t> kPayload(48, 7);

TEST(BlobHeaderTest, ParsesAValidHeader) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  auto header = BlobHeader::Parse(blob.data(), blob.size());
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->format_version, 1u);
  EXPECT_EQ(header->required_features, 3u);
  EXPECT_EQ(header->Metadata(blob.data()), kMeta);
  EXPECT_EQ(header->payload_size, kPayload.size());
  EXPECT_EQ(header->Payload(blob.data())[0], 7);
  EXPECT_EQ(header->payload_offset % 16, 0u);
}

TEST(BlobHeaderTest, RejectsBadMagic) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  std::memcpy(blob.data(), "TR01", 4);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobHeaderTest, RejectsFutureAndPastVersions) {
  for (uint32_t version : {0u, 2u, 0xffffffffu}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
    PutU32(&blob, testing::kFormatVersion, version);
    EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(),
              Error::DelegateInvalidCompatibility)
        << "version " << version;
  }
}

TEST(BlobHeaderTest, RejectsUnknownRequiredFeatureBits) {
  for (uint64_t bit : {uint64_t{1} << 2, uint64_t{1} << 63}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, 0b11 | bit);
    EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(),
              Error::DelegateInvalidCompatibility);
  }
}

TEST(BlobHeaderTest, AcceptsEveryKnownFeatureSubset) {
  for (uint64_t features = 0; features <= kBlobKnownFeatures; ++features) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, features);
    EXPECT_TRUE(BlobHeader::Parse(blob.data(), blob.size()).ok());
  }
}

TEST(BlobHeaderTest, RejectsTruncatedBlobs) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  EXPECT_EQ(BlobHeader::Parse(nullptr, 0).error(), Error::InvalidProgram);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), 0).error(), Error::InvalidProgram);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), 63).error(), Error::InvalidProgram);
  // Header intact, payload cut off.
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size() - 1).error(), Error::InvalidProgram);
}

TEST(BlobHeaderTest, RejectsSmallHeaderSize) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  PutU32(&blob, testing::kHeaderSize, 32);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
  PutU32(&blob, testing::kHeaderSize, static_cast<uint32_t>(blob.size() + 1));
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobHeaderTest, RejectsOverrunningSections) {
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  struct Case {
    testing::BlobField field;
    uint64_t value;
  };
  for (Case c : {Case{testing::kMetadataSize, 1u << 20}, Case{testing::kMetadataOffset, kMax},
                 Case{testing::kMetadataSize, kMax}, Case{testing::kPayloadSize, kMax},
                 Case{testing::kPayloadOffset, kMax - 15},  // aligned, overflows + size
                 Case{testing::kPayloadSize, 49}, Case{testing::kMetadataOffset, 8}}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
    PutU64(&blob, c.field, c.value);
    EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram)
        << "field at " << c.field << " = " << c.value;
  }
}

TEST(BlobHeaderTest, RejectsMisalignedPayload) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  PutU64(&blob, testing::kPayloadOffset, blob.size() - kPayload.size() - 8);
  PutU64(&blob, testing::kPayloadSize, 8);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

}  // namespace
}  // namespace executorch_trt
