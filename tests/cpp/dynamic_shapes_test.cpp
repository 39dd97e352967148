// Copyright (c) executorch-trt authors.
//
// Dynamic shapes end to end: dynamic_rows.pte (tests/cpp/testdata/
// make_dynamic_testdata.py) through ExecuTorch's Module: forward(x[T, 4], pos[T]) with T in
// [1, 8] writes rows 2x+1 of its cache[8, 4] in place and returns y = 3(2x+1) [T, 4] and the
// cache's column sums [1, 4]. One loaded program runs every T; sizes outside the range, or
// x and pos disagreeing on T, are refused with an error and leave the cache untouched.

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/binding/binding_plan.h"
#include "core/binding/copy_counter.h"
#include "core/blob/delegate_metadata.h"
#include "core/common/runtime_types.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using testing::OwnedTensor;

constexpr int kMaxRows = 8;
constexpr int kDim = 4;

class DynamicShapesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    cache_.assign(kMaxRows * kDim, 0.0f);
  }

  // Runs forward on `rows` rows of x (row r is r + 1 + 10 * call) at positions `pos`, with
  // pos given `pos_rows` entries (== rows unless a test wants them to disagree). Returns
  // the error, or checks y and the column sums against the reference and returns Ok.
  Error Forward(int rows, const std::vector<int64_t>& pos, int pos_rows = -1) {
    if (pos_rows < 0) pos_rows = rows;
    std::vector<float> x(static_cast<size_t>(rows) * kDim);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) + 10.0f * calls_;
    OwnedTensor<float> xt(ScalarType::Float, {rows, kDim}, x);
    std::vector<int64_t> p(pos.begin(), pos.begin() + pos_rows);
    OwnedTensor<int64_t> pt(ScalarType::Long, {pos_rows}, p.empty() ? std::vector<int64_t>{} : p);
    const uint64_t copied = BytesCopied();
    auto out = module_.forward({EValue(xt.tensor()), EValue(pt.tensor())});
    if (!out.ok()) return out.error();
    ++calls_;
    EXPECT_EQ(BytesCopied() - copied, 0u) << "the cache update was copied";
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < kDim; ++d) cache_[pos[r] * kDim + d] = 2 * x[r * kDim + d] + 1;
    const auto& y = (*out)[0].toTensor();
    const auto& total = (*out)[1].toTensor();
    EXPECT_EQ(y.dim(), 2);
    EXPECT_EQ(y.size(0), rows) << "the delegate output was not resized to this call's T";
    EXPECT_EQ(y.size(1), kDim);
    for (int i = 0; i < rows * kDim; ++i) {
      EXPECT_FLOAT_EQ(y.const_data_ptr<float>()[i], 3 * (2 * x[i] + 1)) << "y[" << i << "]";
    }
    for (int d = 0; d < kDim; ++d) {
      float sum = 0;
      for (int r = 0; r < kMaxRows; ++r) sum += cache_[r * kDim + d];
      EXPECT_FLOAT_EQ(total.const_data_ptr<float>()[d], sum) << "column " << d;
    }
    return Error::Ok;
  }

  executorch::extension::Module module_{testing::TestDataPath("dynamic_rows.pte")};
  std::vector<float> cache_;
  int calls_ = 0;
};

TEST_F(DynamicShapesTest, OneProgramRunsEveryRowCountInItsRange) {
  ASSERT_EQ(Forward(1, {0}), Error::Ok);
  ASSERT_EQ(Forward(3, {1, 2, 3}), Error::Ok);
  ASSERT_EQ(Forward(8, {7, 6, 5, 4, 3, 2, 1, 0}), Error::Ok);
  ASSERT_EQ(Forward(2, {4, 5}), Error::Ok);  // smaller again after the largest
  ASSERT_EQ(Forward(7, {0, 1, 2, 3, 4, 5, 6}), Error::Ok);
}

TEST_F(DynamicShapesTest, SizesOutsideTheRangeOrUntiedAreRefused) {
  ASSERT_EQ(Forward(2, {0, 1}), Error::Ok);
  EXPECT_NE(Forward(0, {}), Error::Ok) << "T = 0 is below the Dim's min of 1";
  EXPECT_NE(Forward(9, {0, 1, 2, 3, 4, 5, 6, 7, 0}), Error::Ok) << "T = 9 is above max 8";
  EXPECT_NE(Forward(3, {2, 3, 4}, 2), Error::Ok) << "x has T = 3 but pos has T = 2";
  // Nothing was written by the refused calls: the reference cache still matches.
  ASSERT_EQ(Forward(1, {5}), Error::Ok);
}

TEST_F(DynamicShapesTest, TheBlobDeclaresTheRangeAndTheEngineTakesIt) {
  // The delegate's metadata as the exporter wrote it, read back through the C++ reader.
  auto method = module_.method_meta("forward");
  ASSERT_TRUE(method.ok());
  auto x = method->input_tensor_meta(0);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->sizes()[0], kMaxRows) << "ExecuTorch plans the input at its upper bound";
}

// BindingPlan::Create against engines that describe a dynamic dimension each way.
TEST(DynamicBindingPlanTest, AcceptsMinusOneOrTheUpperBoundAndNothingElse) {
  Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
      R"({"engine": "portable", "symbols": [{"name": "T", "min": 1, "max": 8, "opt": 4}],
          "inputs": [{"name": "x", "dtype": "float32", "shape": ["T", 4]}],
          "outputs": [{"name": "y", "dtype": "float32", "shape": ["T", 4]}]})",
      0, 2);
  ASSERT_TRUE(metadata.ok());
  for (const auto& [engine_rows, ok] :
       std::vector<std::pair<int64_t, bool>>{{-1, true}, {8, true}, {4, false}, {9, false}}) {
    testing::DescribedEngine engine(
        {{"x", TensorIOMode::kInput, ScalarType::Float, {engine_rows, kDim}},
         {"y", TensorIOMode::kOutput, ScalarType::Float, {engine_rows, kDim}}},
        {});
    Result<BindingPlan> plan = BindingPlan::Create(metadata.get(), engine);
    EXPECT_EQ(plan.ok(), ok) << "engine dimension " << engine_rows;
    if (plan.ok()) {
      EXPECT_EQ(plan->symbols().size(), 1u);
      EXPECT_EQ(plan->arg(0).nbytes, 8u * kDim * sizeof(float)) << "capacity: the upper bound";
      EXPECT_FALSE(plan->arg(1).is_static);
    }
  }
}

TEST(DynamicBindingPlanTest, MetadataRangesAreValidated) {
  const auto parse = [](const std::string& symbols, uint32_t version = 2) {
    return DelegateMetadata::Parse(
               R"({"engine": "portable", "symbols": )" + symbols +
                   R"(, "inputs": [{"name": "x", "dtype": "float32", "shape": ["T", 4]}],
                   "outputs": []})",
               0, version)
        .error();
  };
  EXPECT_EQ(parse(R"([{"name": "T", "min": 8, "max": 4, "opt": 4}])"), Error::InvalidProgram)
      << "max < min";
  EXPECT_EQ(parse(R"([{"name": "T", "min": 1, "max": 8, "opt": 9}])"), Error::InvalidProgram)
      << "opt > max";
  EXPECT_EQ(parse(R"([{"name": "S", "min": 1, "max": 8, "opt": 4}])"), Error::InvalidProgram)
      << "the shape names an undeclared symbol";
  EXPECT_EQ(parse(R"([{"name": "T", "min": -1, "max": 8, "opt": 4}])"), Error::InvalidProgram)
      << "negative min";
  EXPECT_EQ(parse(R"([{"name": "T", "min": 1, "max": 8, "opt": 4}])", 1), Error::InvalidProgram)
      << "symbols in a version-1 blob";
}

// An engine that takes x[T, 4], pos[T] and writes y[T, 4]: it records what the plan asked
// of it, and "writes" y with the rows of the last x shape (or `wrong_rows` when set).
class RecordingEngine final : public Engine {
 public:
  int32_t NumIOTensors() const override { return 3; }
  std::string IOTensorName(int32_t i) const override {
    return i == 0 ? "x" : i == 1 ? "pos" : i == 2 ? "y" : "";
  }
  TensorIOMode IOMode(const std::string& name) const override {
    return name == "y"                      ? TensorIOMode::kOutput
           : (name == "x" || name == "pos") ? TensorIOMode::kInput
                                            : TensorIOMode::kNone;
  }
  Result<ScalarType> TensorDType(const std::string& name) const override {
    return name == "pos" ? ScalarType::Long : ScalarType::Float;
  }
  Result<std::vector<int64_t>> TensorShape(const std::string& name) const override {
    return name == "pos" ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, kDim};
  }
  AliasReport AliasedInput(const std::string&) const override {
    return AliasReport{AliasReport::Status::kNotAliased, ""};
  }
  Error SetInputShape(const std::string& name, const std::vector<int64_t>& shape) override {
    if (name == "x") rows_ = shape[0];
    return Error::Ok;
  }
  Error SetTensorAddress(const std::string& name, void*, size_t nbytes) override {
    if (name == "y") output_capacity = nbytes;
    return Error::Ok;
  }
  Error Execute() override {
    ++executions;
    return Error::Ok;
  }
  Result<std::vector<int64_t>> OutputShape(const std::string&) const override {
    return std::vector<int64_t>{wrong_rows >= 0 ? wrong_rows : rows_, kDim};
  }

  int executions = 0;
  size_t output_capacity = 0;
  int64_t wrong_rows = -1;

 private:
  int64_t rows_ = 0;
};

class DynamicExecuteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
        R"({"engine": "portable", "symbols": [{"name": "T", "min": 1, "max": 8, "opt": 4}],
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["T", 4]},
                       {"name": "pos", "dtype": "int64", "shape": ["T"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["T", 4]}]})",
        0, 2);
    ASSERT_TRUE(metadata.ok());
    Result<BindingPlan> plan = BindingPlan::Create(metadata.get(), engine_);
    ASSERT_TRUE(plan.ok());
    plan_.emplace(std::move(plan.get()));
  }

  // Executes with x[x_rows, 4], pos[pos_rows] and y allocated at the upper bound but
  // currently sized [y_rows, 4] (what ExecuTorch leaves from an earlier call).
  Error Run(int x_rows, int pos_rows, int y_rows = kMaxRows, int32_t* y_size = nullptr) {
    OwnedTensor<float> x(ScalarType::Float, {x_rows, kDim});
    OwnedTensor<int64_t> pos(ScalarType::Long, {pos_rows});
    std::vector<float> storage(kMaxRows * kDim);
    std::vector<int32_t> sizes = {kMaxRows, kDim}, strides = {kDim, 1};
    std::vector<uint8_t> dim_order = {0, 1};
    // A dynamic-bound tensor, as ExecuTorch plans a delegate output of a dynamic size: made
    // at its upper bound (its capacity), then left at an earlier call's size.
    executorch::runtime::etensor::TensorImpl y_impl(
        ScalarType::Float, 2, sizes.data(), storage.data(), dim_order.data(), strides.data(),
        executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND);
    EValue xv(x.tensor()), pv(pos.tensor());
    EValue yv{executorch::aten::Tensor(&y_impl)};
    const std::vector<int32_t> earlier = {y_rows, kDim};
    EXPECT_EQ(executorch::runtime::resize_tensor(yv.toTensor(), {earlier.data(), earlier.size()}),
              Error::Ok);
    std::vector<EValue*> args = {&xv, &pv, &yv};
    const Error err = plan_->Execute(engine_, Span<EValue*>(args.data(), args.size()));
    if (y_size != nullptr) *y_size = sizes[0];
    return err;
  }

  RecordingEngine engine_;
  std::optional<BindingPlan> plan_;
};

TEST_F(DynamicExecuteTest, ResizesTheOutputAndBindsItsUpperBound) {
  int32_t y_rows = 0;
  ASSERT_EQ(Run(3, 3, kMaxRows, &y_rows), Error::Ok);
  EXPECT_EQ(engine_.executions, 1);
  EXPECT_EQ(y_rows, 3) << "y was not resized to this call's T";
  EXPECT_EQ(engine_.output_capacity, kMaxRows * kDim * sizeof(float));
  ASSERT_EQ(Run(8, 8, 3, &y_rows), Error::Ok);  // growing again after a smaller call
  EXPECT_EQ(y_rows, 8);
}

TEST_F(DynamicExecuteTest, RefusesEachViolationBeforeTheEngineRuns) {
  EXPECT_EQ(Run(0, 0), Error::InvalidArgument) << "below min";
  EXPECT_EQ(Run(9, 9), Error::InvalidArgument) << "above max";
  EXPECT_EQ(Run(3, 2), Error::InvalidArgument) << "x and pos disagree on T";
  EXPECT_EQ(Run(1, 3), Error::InvalidArgument) << "x and pos disagree on T (broadcastable)";
  EXPECT_EQ(engine_.executions, 0);
}

TEST_F(DynamicExecuteTest, AnOutputOfTheWrongSizeIsAnError) {
  engine_.wrong_rows = 2;
  EXPECT_EQ(Run(3, 3), Error::InvalidState);
}

}  // namespace
}  // namespace executorch_trt
