// Copyright (c) executorch-trt authors.
//
// ConstantLayoutsDataMap over a stand-in for a program's own named data (no layouts, like
// ExecuTorch 1.5.1's PteDataMap): layouts come from the descriptor, a buffer of the wrong size
// is refused, keys outside the descriptor pass through, a missing key says NotFound.

#include "core/engine/portable/constant_layouts_data_map.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <executorch/runtime/platform/runtime.h>

#include "core/common/runtime_types.h"

namespace executorch_trt {
namespace {

using executorch::runtime::FreeableBuffer;
using executorch::runtime::TensorLayout;

// Named data without layouts: get_tensor_layout says NotImplemented for a key it has and
// NotFound for one it has not (a .ptd without the key says NotFound too).
class ProgramData final : public executorch::runtime::NamedDataMap {
 public:
  std::map<std::string, std::vector<uint8_t>, std::less<>> blobs;

  Result<const TensorLayout> get_tensor_layout(std::string_view key) const override {
    return blobs.count(key) != 0 ? Error::NotImplemented : Error::NotFound;
  }
  Result<FreeableBuffer> get_data(std::string_view key) const override {
    auto it = blobs.find(key);
    if (it == blobs.end()) return Error::NotFound;
    return FreeableBuffer(it->second.data(), it->second.size(), nullptr);
  }
  Error load_data_into(std::string_view, void*, size_t) const override {
    return Error::NotImplemented;
  }
  Result<uint32_t> get_num_keys() const override { return static_cast<uint32_t>(blobs.size()); }
  Result<const char*> get_key(uint32_t index) const override {
    if (index >= blobs.size()) return Error::InvalidArgument;
    return std::next(blobs.begin(), index)->first.c_str();
  }
};

ConstantLayoutSpec Spec(const std::string& key, std::vector<int32_t> sizes,
                        std::vector<uint8_t> dim_order, size_t nbytes) {
  ConstantLayoutSpec spec;
  spec.key = key;
  spec.scalar_type = ScalarType::Float;
  spec.sizes = std::move(sizes);
  spec.dim_order = std::move(dim_order);
  spec.nbytes = nbytes;
  return spec;
}

class ConstantLayoutsDataMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    data_.blobs["embed"] = std::vector<uint8_t>(2 * 3 * 4, 7);
    data_.blobs["short"] = std::vector<uint8_t>(8, 1);
    data_.blobs["xnnpack"] = std::vector<uint8_t>(5, 2);
  }
  ProgramData data_;
};

TEST_F(ConstantLayoutsDataMapTest, AnswersLayoutsFromTheDescriptor) {
  ConstantLayoutsDataMap map(&data_, {Spec("embed", {2, 3}, {1, 0}, 24)});
  Result<const TensorLayout> layout = map.get_tensor_layout("embed");
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->scalar_type(), ScalarType::Float);
  EXPECT_EQ(layout->nbytes(), 24u);
  ASSERT_EQ(layout->sizes().size(), 2u);
  EXPECT_EQ(layout->sizes()[0], 2);
  EXPECT_EQ(layout->sizes()[1], 3);
  EXPECT_EQ(layout->dim_order()[0], 1);
  EXPECT_EQ(layout->dim_order()[1], 0);
  Result<FreeableBuffer> buffer = map.get_data("embed");
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->data(), data_.blobs["embed"].data());  // forwarded, not copied
  EXPECT_EQ(buffer->size(), 24u);
}

TEST_F(ConstantLayoutsDataMapTest, RefusesDataOfAnotherSize) {
  // The descriptor says 2x3 float32 (24 bytes) but the data has 8: the nested method would
  // read 16 bytes past it.
  ConstantLayoutsDataMap map(&data_, {Spec("short", {2, 3}, {0, 1}, 24)});
  EXPECT_TRUE(map.get_tensor_layout("short").ok());
  EXPECT_EQ(map.get_data("short").error(), Error::InvalidExternalData);
}

TEST_F(ConstantLayoutsDataMapTest, ForwardsOtherKeys) {
  ConstantLayoutsDataMap map(&data_, {Spec("embed", {2, 3}, {0, 1}, 24)});
  EXPECT_EQ(map.get_tensor_layout("xnnpack").error(), Error::NotImplemented);
  Result<FreeableBuffer> buffer = map.get_data("xnnpack");
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->size(), 5u);  // no size rule for keys the descriptor does not list
  EXPECT_EQ(map.get_data("absent").error(), Error::NotFound);
  EXPECT_EQ(map.get_num_keys().get(), 3u);
  EXPECT_STREQ(map.get_key(0).get(), "embed");
  EXPECT_EQ(map.get_key(3).error(), Error::InvalidArgument);
}

TEST_F(ConstantLayoutsDataMapTest, SaysNotFoundForAConstantTheDataLacks) {
  // What a program exported with external_weights=True sees without its .ptd.
  ConstantLayoutsDataMap map(&data_, {Spec("in_the_ptd", {4}, {0}, 16)});
  EXPECT_EQ(map.get_tensor_layout("in_the_ptd").error(), Error::NotFound);
  EXPECT_EQ(map.get_data("in_the_ptd").error(), Error::NotFound);
}

}  // namespace
}  // namespace executorch_trt
