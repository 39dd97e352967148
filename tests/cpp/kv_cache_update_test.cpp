// Copyright (c) executorch-trt authors.
//
// executorch_trt::kv_cache_update.out: in place writes only the new rows; out of place
// equals index_copy; invalid input fails the context and writes nothing.

#include "core/kernels/kv_cache_update.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/common/runtime_types.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::KernelRuntimeContext;
using testing::OwnedTensor;

// cache [2, 6, 3] (batch, seq, dim), value [2, 2, 3] written at seq positions idx.
struct Fixture {
  OwnedTensor<float> cache{ScalarType::Float, {2, 6, 3}};
  OwnedTensor<float> value{ScalarType::Float, {2, 2, 3}};
  OwnedTensor<int64_t> indices{ScalarType::Long, {2}, {4, 1}};
  Fixture() {
    std::iota(cache.data().begin(), cache.data().end(), 100.0f);
    std::iota(value.data().begin(), value.data().end(), -50.0f);
  }
  // Expected index_copy result.
  std::vector<float> Expected() {
    std::vector<float> e = cache.data();
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 2; ++i)
        for (int d = 0; d < 3; ++d)
          e[(b * 6 + indices.data()[i]) * 3 + d] = value.data()[(b * 2 + i) * 3 + d];
    return e;
  }
};

TEST(KvCacheUpdateTest, InPlaceWritesOnlyTheNewRows) {
  Fixture f;
  const std::vector<float> expected = f.Expected();
  // Out shares the cache's storage (the delegate bound it so).
  executorch::aten::Tensor cache = f.cache.tensor();
  executorch::aten::Tensor out = f.cache.tensor();
  float* before = f.cache.ptr();
  KernelRuntimeContext ctx;
  executorch::aten::Tensor& result =
      KvCacheUpdateOut(ctx, cache, f.value.tensor(), f.indices.tensor(), 1, out);
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(result.const_data_ptr(), before);
  EXPECT_EQ(f.cache.ptr(), before);
  EXPECT_EQ(f.cache.data(), expected);
}

TEST(KvCacheUpdateTest, InPlaceLeavesOtherBytesUntouched) {
  // Every byte outside rows 4 and 1 must be bit-identical to before the call.
  Fixture f;
  std::vector<uint8_t> original(f.cache.data().size() * sizeof(float));
  std::memcpy(original.data(), f.cache.ptr(), original.size());
  executorch::aten::Tensor cache = f.cache.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, cache, f.value.tensor(), f.indices.tensor(), -2, cache);
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  const auto* now = reinterpret_cast<const uint8_t*>(f.cache.ptr());
  for (size_t byte = 0; byte < original.size(); ++byte) {
    const size_t row = (byte / sizeof(float) / 3) % 6;
    if (row == 4 || row == 1) continue;
    ASSERT_EQ(now[byte], original[byte]) << "byte " << byte;
  }
}

TEST(KvCacheUpdateTest, OutOfPlaceMatchesIndexCopyAndKeepsTheCache) {
  Fixture f;
  const std::vector<float> expected = f.Expected();
  const std::vector<float> cache_before = f.cache.data();
  OwnedTensor<float> out(ScalarType::Float, {2, 6, 3});
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, f.cache.tensor(), f.value.tensor(), f.indices.tensor(), 1, out_t);
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(out.data(), expected);
  EXPECT_EQ(f.cache.data(), cache_before);
}

TEST(KvCacheUpdateTest, AcceptsInt32IndicesAndOtherDims) {
  OwnedTensor<float> cache(ScalarType::Float, {4, 2});
  OwnedTensor<float> value(ScalarType::Float, {1, 2}, {7, 8});
  OwnedTensor<int32_t> indices(ScalarType::Int, {1}, {3});
  executorch::aten::Tensor c = cache.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, c, value.tensor(), indices.tensor(), 0, c);
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(cache.data(), (std::vector<float>{0, 0, 0, 0, 0, 0, 7, 8}));
}

// A cache rotated from itself: value is the cache's own memory.
TEST(KvCacheUpdateTest, RefusesAValueThatIsTheCacheInPlace) {
  OwnedTensor<float> cache(ScalarType::Float, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  OwnedTensor<int64_t> rotate(ScalarType::Long, {4}, {1, 2, 3, 0});
  const std::vector<float> before = cache.data();
  executorch::aten::Tensor c = cache.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, c, c, rotate.tensor(), 0, c);
  EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(cache.data(), before);
}

TEST(KvCacheUpdateTest, RotatesAValueThatIsTheCacheOutOfPlace) {
  OwnedTensor<float> cache(ScalarType::Float, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  OwnedTensor<int64_t> rotate(ScalarType::Long, {4}, {1, 2, 3, 0});
  OwnedTensor<float> out(ScalarType::Float, {4, 2});
  executorch::aten::Tensor c = cache.tensor();
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, c, c, rotate.tensor(), 0, out_t);
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  // index_copy: out[rotate[i]] = cache[i].
  EXPECT_EQ(out.data(), (std::vector<float>{6, 7, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(cache.data(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(KvCacheUpdateTest, RejectsBadInputsWithoutWriting) {
  struct Case {
    const char* what;
    std::vector<int64_t> idx;
    int64_t dim;
  };
  for (const Case& c : {Case{"index past the end", {4, 6}, 1}, Case{"negative index", {-1, 0}, 1},
                        Case{"too few indices", {1}, 1}, Case{"dim out of range", {1, 2}, 3},
                        Case{"value shape wrong for dim", {1, 2}, 2}}) {
    Fixture f;
    OwnedTensor<int64_t> indices(ScalarType::Long, {static_cast<int32_t>(c.idx.size())}, c.idx);
    const std::vector<float> before = f.cache.data();
    executorch::aten::Tensor cache = f.cache.tensor();
    KernelRuntimeContext ctx;
    KvCacheUpdateOut(ctx, cache, f.value.tensor(), indices.tensor(), c.dim, cache);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument) << c.what;
    EXPECT_EQ(f.cache.data(), before) << c.what;
  }
}

TEST(KvCacheUpdateTest, RejectsDtypeMismatchesAndFloatIndices) {
  Fixture f;
  OwnedTensor<double> value64(ScalarType::Double, {2, 2, 3});
  OwnedTensor<float> float_idx(ScalarType::Float, {2}, {1, 2});
  OwnedTensor<double> out64(ScalarType::Double, {2, 6, 3});
  executorch::aten::Tensor cache = f.cache.tensor();
  {
    KernelRuntimeContext ctx;
    KvCacheUpdateOut(ctx, cache, value64.tensor(), f.indices.tensor(), 1, cache);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  }
  {
    KernelRuntimeContext ctx;
    KvCacheUpdateOut(ctx, cache, f.value.tensor(), float_idx.tensor(), 1, cache);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  }
  {
    KernelRuntimeContext ctx;
    executorch::aten::Tensor out = out64.tensor();
    KvCacheUpdateOut(ctx, cache, f.value.tensor(), f.indices.tensor(), 1, out);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  }
}

TEST(KvCacheUpdateTest, RejectsAnOutOfTheWrongShape) {
  Fixture f;
  OwnedTensor<float> out(ScalarType::Float, {2, 5, 3});  // static: cannot be resized
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext ctx;
  KvCacheUpdateOut(ctx, f.cache.tensor(), f.value.tensor(), f.indices.tensor(), 1, out_t);
  EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(out.data(), std::vector<float>(30, 0.0f));
}

TEST(KvCacheUpdateTest, IsRegisteredAndCallableThroughTheRegistry) {
  executorch::runtime::runtime_init();
  auto op = executorch::runtime::get_op_function_from_registry(kKvCacheUpdateOutOpName);
  ASSERT_TRUE(op.ok());
  Fixture f;
  const std::vector<float> expected = f.Expected();
  EValue cache(f.cache.tensor()), value(f.value.tensor()), indices(f.indices.tensor());
  EValue dim(int64_t{1}), out(f.cache.tensor());
  EValue* stack[] = {&cache, &value, &indices, &dim, &out, &out};
  KernelRuntimeContext ctx;
  (*op)(ctx, executorch::runtime::Span<EValue*>(stack, 6));
  EXPECT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(f.cache.data(), expected);
}

}  // namespace
}  // namespace executorch_trt
