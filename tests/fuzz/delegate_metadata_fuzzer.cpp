// Copyright (c) executorch-trt authors.
//
// delegate_metadata_fuzzer: DelegateMetadata::Parse (core/blob/delegate_metadata.h) on
// arbitrary text, with every required-feature set of format version 1, and for accepted
// metadata the init-time cross-check BindingPlan::Create against engines describing the test
// program (tests/cpp/testdata/make_kv_testdata.py: x, pos, k_cache | y, k_cache_out) with each
// alias report an engine can give. An accepted metadata must have non-empty binding names and
// non-negative dimensions; an accepted plan must bind every argument.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/binding/binding_plan.h"
#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "tests/cpp/test_util.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using executorch::aten::ScalarType;
using executorch_trt::AliasReport;
using executorch_trt::BindingPlan;
using executorch_trt::DelegateMetadata;
using executorch_trt::TensorIOMode;
using executorch_trt::fuzz::Check;
using executorch_trt::testing::DescribedEngine;

DescribedEngine KvEngine(AliasReport report) {
  return DescribedEngine({{"x", TensorIOMode::kInput, ScalarType::Float, {1, 4}},
                          {"pos", TensorIOMode::kInput, ScalarType::Long, {1}},
                          {"k_cache", TensorIOMode::kInput, ScalarType::Float, {1, 8, 4}},
                          {"y", TensorIOMode::kOutput, ScalarType::Float, {1, 4}},
                          {"k_cache_out", TensorIOMode::kOutput, ScalarType::Float, {1, 8, 4}}},
                         {{"k_cache_out", report}});
}

const DescribedEngine& Engine(int which) {
  static const DescribedEngine kEngines[] = {
      KvEngine({AliasReport::Status::kUnknown, ""}),
      KvEngine({AliasReport::Status::kAliased, "k_cache"}),
      KvEngine({AliasReport::Status::kNotAliased, ""}),
  };
  return kEngines[which];
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  executorch_trt::fuzz::InitRuntimeForFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (uint64_t features = 0; features <= executorch_trt::kBlobKnownFeatures; ++features) {
    executorch::runtime::Result<DelegateMetadata> metadata =
        DelegateMetadata::Parse(text, features, executorch_trt::kBlobFormatVersion);
    if (!metadata.ok()) continue;
    for (const auto* list : {&metadata->inputs, &metadata->outputs}) {
      for (const auto& binding : *list) {
        Check(!binding.name.empty(), "binding names are non-empty");
        for (int64_t d : binding.shape) Check(d >= 0, "dimensions are non-negative");
      }
    }
    Check(metadata->aliased_io.empty() || (features & executorch_trt::kBlobFeatureAliasedIo) != 0,
          "aliased_io needs the ALIASED_IO feature");
    for (int which = 0; which < 3; ++which) {
      executorch::runtime::Result<BindingPlan> plan =
          BindingPlan::Create(metadata.get(), Engine(which));
      if (!plan.ok()) continue;
      Check(plan->num_args() == metadata->inputs.size() + metadata->outputs.size(),
            "the plan binds every delegate argument");
    }
  }
  return 0;
}
