// Copyright (c) executorch-trt authors.
//
// DelegateMetadata parses the blob JSON and rejects anything it does not understand.

#include "core/blob/delegate_metadata.h"

#include <gtest/gtest.h>

#include "core/blob/blob_header.h"

namespace executorch_trt {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;

constexpr uint64_t kAll = kBlobFeatureAliasedIo | kBlobFeatureOwnership;

std::string Meta(const std::string& aliased_io) {
  return R"({"engine": "portable",
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]},
               {"name": "k_cache", "dtype": "float16", "shape": [1, 8, 4]}],
    "outputs": [{"name": "y", "dtype": "int64", "shape": []},
                {"name": "k_cache_out", "dtype": "float16", "shape": [1, 8, 4]}],
    "aliased_io": )" +
         aliased_io + "}";
}

TEST(DelegateMetadataTest, ParsesBindingsAndAliases) {
  auto m =
      DelegateMetadata::Parse(Meta(R"([{"output": "k_cache_out", "input": "k_cache", "kind": "user",
                "ownership": "caller"}])"),
                              kAll);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->engine, EngineKind::kPortable);
  ASSERT_EQ(m->inputs.size(), 2u);
  EXPECT_EQ(m->inputs[1].name, "k_cache");
  EXPECT_EQ(m->inputs[1].dtype, ScalarType::Half);
  EXPECT_EQ(m->inputs[1].shape, (std::vector<int64_t>{1, 8, 4}));
  EXPECT_EQ(m->outputs[0].dtype, ScalarType::Long);
  EXPECT_TRUE(m->outputs[0].shape.empty());
  ASSERT_EQ(m->aliased_io.size(), 1u);
  EXPECT_EQ(m->aliased_io[0].output, "k_cache_out");
  EXPECT_EQ(m->aliased_io[0].input, "k_cache");
  EXPECT_EQ(m->aliased_io[0].kind, AliasKind::kUser);
  EXPECT_EQ(m->aliased_io[0].ownership, Ownership::kCaller);
}

TEST(DelegateMetadataTest, MissingKindMeansKvCacheUpdate) {
  auto m = DelegateMetadata::Parse(
      Meta(R"([{"output": "k_cache_out", "input": "k_cache", "ownership": "caller"}])"), kAll);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->aliased_io[0].kind, AliasKind::kKvCacheUpdate);
}

TEST(DelegateMetadataTest, RejectsUnknownKind) {
  EXPECT_EQ(DelegateMetadata::Parse(Meta(R"([{"output": "k_cache_out", "input": "k_cache",
                          "kind": "kv_cache_updat", "ownership": "caller"}])"),
                                    kAll)
                .error(),
            Error::InvalidProgram);
  EXPECT_EQ(DelegateMetadata::Parse(Meta(R"([{"output": "k_cache_out", "input": "k_cache",
                                             "kind": 3, "ownership": "caller"}])"),
                                    kAll)
                .error(),
            Error::InvalidProgram);
}

TEST(DelegateMetadataTest, RejectsUnknownOwnership) {
  EXPECT_EQ(DelegateMetadata::Parse(Meta(R"([{"output": "k_cache_out", "input": "k_cache",
                                             "ownership": "delegate"}])"),
                                    kAll)
                .error(),
            Error::InvalidProgram);
}

TEST(DelegateMetadataTest, OwnershipRequiredOnlyWithTheOwnershipFeature) {
  const std::string meta = Meta(R"([{"output": "k_cache_out", "input": "k_cache"}])");
  EXPECT_EQ(DelegateMetadata::Parse(meta, kAll).error(), Error::InvalidProgram);
  auto old = DelegateMetadata::Parse(meta, kBlobFeatureAliasedIo);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->aliased_io[0].ownership, Ownership::kCaller);
}

TEST(DelegateMetadataTest, AliasesRequireTheAliasedIoFeature) {
  const std::string meta = Meta(R"([{"output": "k_cache_out", "input": "k_cache",
                                     "ownership": "caller"}])");
  EXPECT_EQ(DelegateMetadata::Parse(meta, 0).error(), Error::InvalidProgram);
  EXPECT_EQ(DelegateMetadata::Parse(meta, kBlobFeatureOwnership).error(), Error::InvalidProgram);
  EXPECT_TRUE(DelegateMetadata::Parse(Meta("[]"), 0).ok());
}

TEST(DelegateMetadataTest, MissingAliasedIoIsEmpty) {
  auto m = DelegateMetadata::Parse(R"({"engine": "tensorrt", "inputs": [], "outputs": []})", 0);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->engine, EngineKind::kTensorRT);
  EXPECT_TRUE(m->aliased_io.empty());
}

TEST(DelegateMetadataTest, RejectsUnknownDtypeAndEngine) {
  EXPECT_EQ(DelegateMetadata::Parse(R"({"engine": "portable", "outputs": [],
      "inputs": [{"name": "x", "dtype": "float8", "shape": [1]}]})",
                                    kAll)
                .error(),
            Error::InvalidProgram);
  EXPECT_EQ(
      DelegateMetadata::Parse(R"({"engine": "onnx", "inputs": [], "outputs": []})", kAll).error(),
      Error::InvalidProgram);
}

TEST(DelegateMetadataTest, RejectsMalformedJsonWithoutThrowing) {
  for (const char* text : {"", "{", "[]", "null", R"({"engine": "portable"})",
                           R"({"engine": "portable", "inputs": {}, "outputs": []})",
                           R"({"engine": "portable", "inputs": [{"name": "x"}], "outputs": []})",
                           R"({"engine": "portable", "outputs": [],
                               "inputs": [{"name": "x", "dtype": "float32", "shape": [-1]}]})",
                           R"({"engine": "portable", "outputs": [],
                               "inputs": [{"name": "x", "dtype": "float32", "shape": [1.5]}]})",
                           R"({"engine": "portable", "outputs": [],
                               "inputs": [{"name": "", "dtype": "float32", "shape": []}]})",
                           R"({"engine": "portable", "inputs": [], "outputs": [],
                               "aliased_io": [{"output": "y"}]})",
                           R"({"engine": "portable", "inputs": [], "outputs": [],
                               "aliased_io": {}})"}) {
    EXPECT_EQ(DelegateMetadata::Parse(text, kAll).error(), Error::InvalidProgram) << text;
  }
}

}  // namespace
}  // namespace executorch_trt
