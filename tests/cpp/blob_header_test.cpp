// Copyright (c) executorch-trt authors.
//
// BlobHeader fails closed on every malformed or incompatible header.

#include "core/blob/blob_header.h"

#include <gtest/gtest.h>

#include <string>

#include <limits>

#include "core/blob/checksum.h"
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

TEST(BlobHeaderTest, ReadsVersionsOneAndTwo) {
  for (uint32_t version : {1u, 2u}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, 0b11, version);
    auto header = BlobHeader::Parse(blob.data(), blob.size());
    ASSERT_TRUE(header.ok()) << "version " << version;
    EXPECT_EQ(header->format_version, version);
  }
}

TEST(BlobHeaderTest, RejectsFutureAndPastVersions) {
  for (uint32_t version : {0u, 3u, 0xffffffffu}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
    PutU32(&blob, kBlobOffsetFormatVersion, version);
    EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(),
              Error::DelegateInvalidCompatibility)
        << "version " << version;
  }
}

TEST(BlobHeaderTest, RejectsUnknownRequiredFeatureBits) {
  for (uint64_t bit : {uint64_t{1} << 3, uint64_t{1} << 63}) {
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

TEST(BlobHeaderTest, RejectsANonZeroReservedField) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  PutU32(&blob, kBlobOffsetReserved, 0x100);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobHeaderTest, RejectsSmallHeaderSize) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  PutU32(&blob, kBlobOffsetHeaderSize, 32);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
  PutU32(&blob, kBlobOffsetHeaderSize, static_cast<uint32_t>(blob.size() + 1));
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobHeaderTest, RejectsOverrunningSections) {
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  struct Case {
    size_t field;
    uint64_t value;
  };
  for (Case c : {Case{kBlobOffsetMetadataSize, 1u << 20}, Case{kBlobOffsetMetadataOffset, kMax},
                 Case{kBlobOffsetMetadataSize, kMax}, Case{kBlobOffsetPayloadSize, kMax},
                 Case{kBlobOffsetPayloadOffset, kMax - 15},  // aligned, overflows + size
                 Case{kBlobOffsetPayloadSize, 49}, Case{kBlobOffsetMetadataOffset, 8}}) {
    std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
    PutU64(&blob, c.field, c.value);
    EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram)
        << "field at " << c.field << " = " << c.value;
  }
}

TEST(BlobHeaderTest, RejectsMisalignedPayload) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload);
  PutU64(&blob, kBlobOffsetPayloadOffset, blob.size() - kPayload.size() - 8);
  PutU64(&blob, kBlobOffsetPayloadSize, 8);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

// Values from Python: int.from_bytes(hashlib.blake2b(d, digest_size=8).digest(), "little").
TEST(BlobChecksumTest, MatchesBlake2b64TestVectors) {
  EXPECT_EQ(Blake2b64(nullptr, 0), 0xb4b2797457a0a6e4ULL);
  EXPECT_EQ(Blake2b64("abc", 3), 0x5995d533d814bbd8ULL);
  std::vector<uint8_t> ramp(128);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Blake2b64(ramp.data(), ramp.size()), 0x827e61b6f13dd1c2ULL);  // one full block
  std::vector<uint8_t> ramps;  // bytes(range(256)) * 3 + b"x": several blocks + 1 byte
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 256; ++i) ramps.push_back(static_cast<uint8_t>(i));
  ramps.push_back('x');
  EXPECT_EQ(Blake2b64(ramps.data(), ramps.size()), 0x92d9fb6cb9808899ULL);
  const std::vector<uint8_t> zeros(129, 0);
  EXPECT_EQ(Blake2b64(zeros.data(), zeros.size()), 0xf4d3860d8871c573ULL);
}

constexpr uint64_t kAllFeatures = 0b111;

TEST(BlobChecksumTest, ParsesAChecksummedBlob) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, kAllFeatures);
  auto header = BlobHeader::Parse(blob.data(), blob.size());
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->required_features, kAllFeatures);
  EXPECT_EQ(header->checksum, Blake2b64(blob.data() + 64, blob.size() - 64));
  EXPECT_NE(header->checksum, 0u);
}

TEST(BlobChecksumTest, RejectsEveryChangedMetadataPaddingOrPayloadByte) {
  const std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, kAllFeatures);
  const size_t payload_offset = blob.size() - kPayload.size();
  ASSERT_GT(payload_offset, 64 + kMeta.size()) << "the test wants some padding";
  for (size_t at = 64; at < blob.size(); ++at) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = blob;
      bad[at] ^= flip;
      const char* where = at < 64 + kMeta.size() ? "metadata"
                          : at < payload_offset  ? "padding"
                                                 : "payload";
      EXPECT_EQ(BlobHeader::Parse(bad.data(), bad.size()).error(), Error::InvalidProgram)
          << where << " byte " << at << " ^ " << int(flip);
    }
  }
}

TEST(BlobChecksumTest, RejectsAChangedChecksumField) {
  for (size_t at = kBlobOffsetChecksum; at < 64; ++at) {
    std::vector<uint8_t> bad = MakeBlob(kMeta, kPayload, kAllFeatures);
    bad[at] ^= 0x10;
    EXPECT_EQ(BlobHeader::Parse(bad.data(), bad.size()).error(), Error::InvalidProgram)
        << "checksum byte " << at;
  }
}

TEST(BlobChecksumTest, ClearingTheFeatureBitDoesNotDisableTheCheck) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, kAllFeatures);
  PutU64(&blob, kBlobOffsetRequiredFeatures, 0b11);  // checksum field left non-zero
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobChecksumTest, OlderBlobsWithoutTheBitStillParse) {
  // An older writer: no CHECKSUM bit, field 0, nothing verified.
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, 0b11);
  blob.back() ^= 0xff;
  auto header = BlobHeader::Parse(blob.data(), blob.size());
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->checksum, 0u);
  // But the reserved field must then be 0.
  PutU64(&blob, kBlobOffsetChecksum, 1);
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
}

TEST(BlobChecksumTest, RejectsMetadataThatRunsIntoThePayload) {
  std::vector<uint8_t> blob = MakeBlob(kMeta, kPayload, kAllFeatures);
  const uint64_t payload_offset = blob.size() - kPayload.size();
  PutU64(&blob, kBlobOffsetMetadataSize, payload_offset - 64 + 1);
  testing::ResealBlob(&blob);  // even with a checksum that matches the bytes
  EXPECT_EQ(BlobHeader::Parse(blob.data(), blob.size()).error(), Error::InvalidProgram);
  PutU64(&blob, kBlobOffsetMetadataSize, payload_offset - 64);  // exactly up to it: fine
  EXPECT_TRUE(BlobHeader::Parse(blob.data(), blob.size()).ok());
}

}  // namespace
}  // namespace executorch_trt
