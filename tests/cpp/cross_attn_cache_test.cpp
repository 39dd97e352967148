// Copyright (c) executorch-trt authors.
//
// executorch::update_cross_attn_cache.out and executorch::alias.out: values against the ops'
// definitions in ExecuTorch's custom_ops.py, in place vs a separate output, bad input fails
// the context and writes nothing, and both are in ExecuTorch's kernel registry.

#include "core/kernels/cross_attn_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/common/runtime_types.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::KernelRuntimeContext;
using testing::OwnedTensor;

// cache [B=2, H=2, S_max=4, D=3] (100, 101, ...), value [2, 2, S=2, 3] (-1, -2, ...).
struct Fixture {
  OwnedTensor<float> cache{ScalarType::Float, {2, 2, 4, 3}};
  OwnedTensor<float> value{ScalarType::Float, {2, 2, 2, 3}};
  Fixture() {
    std::iota(cache.data().begin(), cache.data().end(), 100.0f);
    for (size_t i = 0; i < value.data().size(); ++i) value.data()[i] = -1.0f - i;
  }
  // cache[:, :, :2, :] = value, as custom_ops.py's eager implementation does.
  std::vector<float> Expected() const {
    std::vector<float> e = cache_before;
    for (int bh = 0; bh < 4; ++bh)
      for (int s = 0; s < 2; ++s)
        for (int d = 0; d < 3; ++d) e[(bh * 4 + s) * 3 + d] = value_before[(bh * 2 + s) * 3 + d];
    return e;
  }
  std::vector<float> cache_before = cache.data();
  std::vector<float> value_before = value.data();
};

TEST(UpdateCrossAttnCacheTest, InPlaceWritesTheFirstRowsOfEveryHead) {
  Fixture f;
  f.cache_before = f.cache.data();
  f.value_before = f.value.data();
  executorch::aten::Tensor cache = f.cache.tensor();
  const void* storage = f.cache.ptr();
  const uint64_t updates_before = CrossAttnCacheUpdates();
  KernelRuntimeContext ctx;
  executorch::aten::Tensor& result = UpdateCrossAttnCacheOut(ctx, f.value.tensor(), cache, cache);
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(result.const_data_ptr(), storage);
  EXPECT_EQ(f.cache.data(), f.Expected());
  // One write, counted once (the C entry point reads the same counter).
  EXPECT_EQ(CrossAttnCacheUpdates(), updates_before + 1);
  EXPECT_EQ(executorch_trt_cross_attn_cache_updates(), updates_before + 1);
}

TEST(UpdateCrossAttnCacheTest, SeparateOutputGetsTheUpdateAndTheCacheStays) {
  Fixture f;
  f.cache_before = f.cache.data();
  f.value_before = f.value.data();
  OwnedTensor<float> out(ScalarType::Float, {2, 2, 4, 3});
  executorch::aten::Tensor out_t = out.tensor();
  KernelRuntimeContext ctx;
  UpdateCrossAttnCacheOut(ctx, f.value.tensor(), f.cache.tensor(), out_t);
  ASSERT_EQ(ctx.failure_state(), Error::Ok);
  EXPECT_EQ(out.data(), f.Expected());
  EXPECT_EQ(f.cache.data(), f.cache_before);
}

TEST(UpdateCrossAttnCacheTest, RejectsBadInputsWithoutWriting) {
  struct Case {
    const char* what;
    std::vector<int32_t> value_sizes;
  };
  for (const Case& c :
       {Case{"rank 3", {2, 2, 3}}, Case{"longer than the cache", {2, 2, 5, 3}},
        Case{"batch", {1, 2, 2, 3}}, Case{"heads", {2, 1, 2, 3}}, Case{"head dim", {2, 2, 2, 4}}}) {
    Fixture f;
    const std::vector<float> before = f.cache.data();
    OwnedTensor<float> value(ScalarType::Float, c.value_sizes);
    executorch::aten::Tensor cache = f.cache.tensor();
    KernelRuntimeContext ctx;
    UpdateCrossAttnCacheOut(ctx, value.tensor(), cache, cache);
    EXPECT_EQ(ctx.failure_state(), Error::InvalidArgument) << c.what;
    EXPECT_EQ(f.cache.data(), before) << c.what;
  }
  Fixture f;
  const std::vector<float> before = f.cache.data();
  const uint64_t updates_before = CrossAttnCacheUpdates();
  OwnedTensor<double> value64(ScalarType::Double, {2, 2, 2, 3});
  OwnedTensor<double> out64(ScalarType::Double, {2, 2, 4, 3});
  executorch::aten::Tensor cache = f.cache.tensor();
  executorch::aten::Tensor out64_t = out64.tensor();
  KernelRuntimeContext dtype_ctx;
  UpdateCrossAttnCacheOut(dtype_ctx, value64.tensor(), cache, cache);
  EXPECT_EQ(dtype_ctx.failure_state(), Error::InvalidArgument);
  KernelRuntimeContext out_ctx;
  UpdateCrossAttnCacheOut(out_ctx, f.value.tensor(), cache, out64_t);
  EXPECT_EQ(out_ctx.failure_state(), Error::InvalidArgument);
  EXPECT_EQ(f.cache.data(), before);
  EXPECT_EQ(CrossAttnCacheUpdates(), updates_before) << "a rejected call wrote nothing";
}

// Calls the registered boxed kernel as ExecuTorch's interpreter does.
Error CallRegistered(const char* name, std::vector<EValue*> stack) {
  auto fn = executorch::runtime::get_op_function_from_registry(name);
  if (!fn.ok()) {
    return fn.error();
  }
  KernelRuntimeContext ctx;
  (*fn.get())(ctx, Span<EValue*>(stack.data(), stack.size()));
  return ctx.failure_state();
}

TEST(AliasOutTest, SameStorageIsLeftAloneAndSeparateOutputsGetCopies) {
  executorch::runtime::runtime_init();
  OwnedTensor<float> x(ScalarType::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor<int64_t> y(ScalarType::Long, {2}, {7, 8});
  OwnedTensor<int64_t> y_out(ScalarType::Long, {2});
  EValue xe(x.tensor()), ye(y.tensor()), x_out(x.tensor()), y_oute(y_out.tensor()), r0, r1;
  ASSERT_EQ(CallRegistered(kAliasOutOpName, {&xe, &ye, &x_out, &y_oute, &r0, &r1}), Error::Ok);
  EXPECT_EQ(x.data(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(y_out.data(), (std::vector<int64_t>{7, 8}));
  ASSERT_TRUE(r0.isTensor() && r1.isTensor());
  EXPECT_EQ(r0.toTensor().const_data_ptr(), x.ptr());
  EXPECT_EQ(r1.toTensor().const_data_ptr(), y_out.ptr());
}

TEST(AliasOutTest, RejectsMismatchedOutputsAndBadStacks) {
  executorch::runtime::runtime_init();
  OwnedTensor<float> x(ScalarType::Float, {2, 3});
  OwnedTensor<double> wrong(ScalarType::Double, {2, 3});
  EValue xe(x.tensor()), we(wrong.tensor()), scalar(int64_t{3});
  EXPECT_EQ(CallRegistered(kAliasOutOpName, {&xe, &xe, &we, &xe}), Error::InvalidArgument);
  EXPECT_EQ(CallRegistered(kAliasOutOpName, {&xe, &scalar, &xe, &xe}), Error::InvalidArgument);
  EXPECT_EQ(CallRegistered(kAliasOutOpName, {&xe, &xe, &xe}), Error::InvalidArgument);
}

TEST(UpdateCrossAttnCacheTest, IsRegisteredUnderItsOperatorName) {
  executorch::runtime::runtime_init();
  Fixture f;
  f.cache_before = f.cache.data();
  f.value_before = f.value.data();
  EValue value(f.value.tensor()), cache(f.cache.tensor()), out(f.cache.tensor()), ret;
  ASSERT_EQ(CallRegistered(kUpdateCrossAttnCacheOutOpName, {&value, &cache, &out, &ret}),
            Error::Ok);
  EXPECT_EQ(f.cache.data(), f.Expected());
}

}  // namespace
}  // namespace executorch_trt
