// Copyright (c) executorch-trt authors.
//
// BindingPlan::Create validates the blob metadata against the engine and rejects every
// inconsistency. The engine here only describes bindings; execution through a real
// engine is covered by portable_engine_test and backend_test.

#include "core/binding/binding_plan.h"

#include <gtest/gtest.h>

#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using testing::DescribedEngine;
using Status = AliasReport::Status;

const std::vector<int64_t> kCache = {1, 8, 4};

// Engine order: x, k_cache | y, k_cache_out; k_cache_out aliases k_cache.
DescribedEngine MakeEngine(AliasReport report = {Status::kAliased, "k_cache"},
                           std::vector<int64_t> out_shape = kCache) {
  return DescribedEngine({{"x", TensorIOMode::kInput, ScalarType::Float, {1, 4}},
                          {"k_cache", TensorIOMode::kInput, ScalarType::Float, kCache},
                          {"y", TensorIOMode::kOutput, ScalarType::Float, {1, 4}},
                          {"k_cache_out", TensorIOMode::kOutput, ScalarType::Float, out_shape}},
                         {{"k_cache_out", report}});
}

// Delegate order differs from engine order: k_cache, x | k_cache_out, y.
DelegateMetadata MakeMetadata(AliasKind kind = AliasKind::kKvCacheUpdate,
                              std::vector<int64_t> out_shape = kCache) {
  DelegateMetadata m;
  m.inputs = {{"k_cache", ScalarType::Float, kCache}, {"x", ScalarType::Float, {1, 4}}};
  m.outputs = {{"k_cache_out", ScalarType::Float, out_shape}, {"y", ScalarType::Float, {1, 4}}};
  m.aliased_io = {{"k_cache_out", "k_cache", kind, Ownership::kCaller}};
  return m;
}

TEST(BindingPlanTest, FollowsMetadataOrderAndMapsAliases) {
  auto plan = BindingPlan::Create(MakeMetadata(), MakeEngine());
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->num_args(), 4u);
  EXPECT_EQ(plan->num_inputs(), 2u);
  EXPECT_EQ(plan->arg(0).name, "k_cache");
  EXPECT_EQ(plan->arg(1).name, "x");
  EXPECT_EQ(plan->arg(2).name, "k_cache_out");
  EXPECT_TRUE(plan->arg(2).aliased);
  EXPECT_EQ(plan->arg(2).alias_input_arg, 0u);
  EXPECT_EQ(plan->arg(2).nbytes, 128u);
  EXPECT_FALSE(plan->arg(3).aliased);
}

TEST(BindingPlanTest, RejectsWrongCounts) {
  DelegateMetadata m = MakeMetadata();
  m.outputs.pop_back();
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
  m = MakeMetadata();
  m.inputs.push_back({"extra", ScalarType::Float, {1}});
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsNamesThatAreNotBindings) {
  DelegateMetadata m = MakeMetadata();
  m.inputs[1].name = "z";
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsDuplicateNames) {
  DelegateMetadata m = MakeMetadata();
  m.inputs[1] = m.inputs[0];
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsIOModeMismatch) {
  DelegateMetadata m = MakeMetadata();
  std::swap(m.inputs[1], m.outputs[1]);  // x listed as an output, y as an input
  m.inputs[1].name = "y";
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsDtypeAndShapeMismatchWithEngine) {
  DelegateMetadata m = MakeMetadata();
  m.inputs[1].dtype = ScalarType::Half;
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
  m = MakeMetadata();
  m.inputs[1].shape = {4, 1};
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsAliasNamingAMissingBinding) {
  DelegateMetadata m = MakeMetadata();
  m.aliased_io[0].input = "v_cache";
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
  m = MakeMetadata();
  m.aliased_io[0].output = "v_cache_out";
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
  m = MakeMetadata();
  m.aliased_io[0].input = "y";  // an output, not an input
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsKvAliasTheEngineDisagreesWith) {
  EXPECT_EQ(BindingPlan::Create(MakeMetadata(), MakeEngine({Status::kAliased, "x"})).error(),
            Error::InvalidProgram);
  EXPECT_EQ(BindingPlan::Create(MakeMetadata(), MakeEngine({Status::kNotAliased, ""})).error(),
            Error::InvalidProgram);
}

TEST(BindingPlanTest, TrustsKvAliasWhenTheEngineCannotTell) {
  auto plan = BindingPlan::Create(MakeMetadata(), MakeEngine({Status::kUnknown, ""}));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->arg(2).aliased);
}

TEST(BindingPlanTest, AcceptsUserAliasTheEngineCannotSee) {
  auto plan =
      BindingPlan::Create(MakeMetadata(AliasKind::kUser), MakeEngine({Status::kNotAliased, ""}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->arg(2).alias_kind, AliasKind::kUser);
}

TEST(BindingPlanTest, RejectsUserAliasShapeMismatch) {
  const std::vector<int64_t> other = {1, 4, 8};
  EXPECT_EQ(BindingPlan::Create(MakeMetadata(AliasKind::kUser, other),
                                MakeEngine({Status::kNotAliased, ""}, other))
                .error(),
            Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsUserAliasDtypeMismatch) {
  DelegateMetadata m = MakeMetadata(AliasKind::kUser);
  m.aliased_io[0] = {"y", "x", AliasKind::kUser, Ownership::kCaller};
  m.aliased_io.push_back({"k_cache_out", "k_cache", AliasKind::kKvCacheUpdate, Ownership::kCaller});
  EXPECT_TRUE(BindingPlan::Create(m, MakeEngine()).ok());  // same dtype and shape
  DescribedEngine engine({{"x", TensorIOMode::kInput, ScalarType::Float, {1, 4}},
                          {"k_cache", TensorIOMode::kInput, ScalarType::Float, kCache},
                          {"y", TensorIOMode::kOutput, ScalarType::Int, {1, 4}},
                          {"k_cache_out", TensorIOMode::kOutput, ScalarType::Float, kCache}},
                         {{"k_cache_out", {Status::kAliased, "k_cache"}}});
  m.outputs[1].dtype = ScalarType::Int;
  EXPECT_EQ(BindingPlan::Create(m, engine).error(), Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsDoubleAliases) {
  DelegateMetadata m = MakeMetadata();
  m.aliased_io.push_back(m.aliased_io[0]);  // same output twice
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
  m = MakeMetadata(AliasKind::kUser);
  m.aliased_io.push_back({"y", "k_cache", AliasKind::kUser, Ownership::kCaller});
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine({Status::kNotAliased, ""})).error(),
            Error::InvalidProgram);
}

TEST(BindingPlanTest, RejectsEngineAliasTheBlobDoesNotDeclare) {
  DelegateMetadata m = MakeMetadata();
  m.aliased_io.clear();
  EXPECT_EQ(BindingPlan::Create(m, MakeEngine()).error(), Error::InvalidProgram);
}

}  // namespace
}  // namespace executorch_trt
