// Copyright (c) executorch-trt authors.
//
// delegate_metadata_fuzzer: DelegateMetadata::Parse (core/blob/delegate_metadata.h) on
// arbitrary text, with every required-feature set, as format version 2 (a superset of 1:
// dynamic dimensions), and for accepted
// metadata the init-time cross-check BindingPlan::Create against engines describing the test
// program (tests/cpp/testdata/make_kv_testdata.py: x, pos, k_cache | y, k_cache_out) with each
// alias report an engine can give. An accepted metadata must have non-empty binding names and
// non-negative dimensions; an accepted plan must bind every argument.
//
// Its custom mutator (LLVMFuzzerCustomMutator) is structure-aware: it parses the input as JSON
// (nlohmann-json, as the parser under test does), changes one node (a value of another type,
// an edge number, a known or another node's string, a deleted or added key, an array element
// duplicated, deleted or swapped) and re-serialises; an input that does not parse, or one time
// in four, gets libFuzzer's own byte mutation instead.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

using Json = nlohmann::json;

// Strings the metadata format gives meaning to (docs/formats/delegate_blob.md): every quoted word
// of metadata.dict (keep the two alike), plus "delegate", "" and "\xff".
constexpr const char* kWords[] = {
    "engine",
    "portable",
    "tensorrt",
    "inputs",
    "outputs",
    "aliased_io",
    "name",
    "dtype",
    "shape",
    "output",
    "input",
    "kind",
    "kv_cache_update",
    "user",
    "ownership",
    "caller",
    "delegate",
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "x",
    "pos",
    "k_cache",
    "k_cache_out",
    "y",
    "symbols",
    "min",
    "max",
    "opt",
    "T",
    "",
    "\xff",
};

// Numbers at the edges of what the parser converts (int64, uint64, double, int32 shapes).
Json EdgeNumber(std::mt19937& rng) {
  switch (rng() % 10) {
    case 0:
      return 0;
    case 1:
      return -1;
    case 2:
      return std::numeric_limits<int64_t>::max();
    case 3:
      return std::numeric_limits<int64_t>::min();
    case 4:
      return std::numeric_limits<uint64_t>::max();
    case 5:
      return int64_t{1} << 31;
    case 6:
      return 1.5;
    case 7:
      return 1e300;
    case 8:
      return -0.0;
    default:
      return static_cast<int64_t>(rng() % 16);
  }
}

// A value of a random type.
Json AnyValue(std::mt19937& rng) {
  switch (rng() % 7) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return EdgeNumber(rng);
    case 3:
      return kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    case 4:
      return Json::array();
    case 5:
      return Json::object();
    default:
      return Json::array({EdgeNumber(rng)});
  }
}

// Every node of `j` (itself included), depth first.
void Collect(Json* j, std::vector<Json*>* nodes) {
  nodes->push_back(j);
  if (j->is_object() || j->is_array()) {
    for (auto& child : *j) Collect(&child, nodes);
  }
}

// One structural change to `root`.
void MutateJson(Json* root, std::mt19937& rng) {
  std::vector<Json*> nodes;
  Collect(root, &nodes);
  Json& node = *nodes[rng() % nodes.size()];
  switch (rng() % 6) {
    case 0:  // a value of another type
      node = AnyValue(rng);
      return;
    case 1:  // an edge number, or a number nudged
      if (node.is_number_integer() && rng() % 2 == 0) {
        // Wrapping (unsigned) arithmetic: INT64_MIN - 1 must not overflow.
        const uint64_t n = static_cast<uint64_t>(node.get<int64_t>());
        node = static_cast<int64_t>(rng() % 2 == 0 ? n + 1 : n - 1);
      } else {
        node = EdgeNumber(rng);
      }
      return;
    case 2: {  // a known word, or another string node's value (e.g. a binding name)
      std::vector<const Json*> strings;
      for (const Json* n : nodes) {
        if (n->is_string()) strings.push_back(n);
      }
      if (!strings.empty() && rng() % 2 == 0) {
        node = Json(*strings[rng() % strings.size()]);
      } else {
        node = kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
      }
      return;
    }
    case 3:  // delete a key or an element
      if (node.is_object() && !node.empty()) {
        auto it = node.begin();
        std::advance(it, rng() % node.size());
        node.erase(it);
      } else if (node.is_array() && !node.empty()) {
        node.erase(node.begin() + rng() % node.size());
      } else {
        node = AnyValue(rng);
      }
      return;
    case 4:  // duplicate or swap array elements; add a key to an object
      if (node.is_array() && !node.empty()) {
        const size_t a = rng() % node.size(), b = rng() % node.size();
        if (rng() % 2 == 0) {
          node.insert(node.begin() + b, Json(node[a]));
        } else {
          std::swap(node[a], node[b]);
        }
      } else if (node.is_object()) {
        node[kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))]] = AnyValue(rng);
      } else {
        node = AnyValue(rng);
      }
      return;
    default:  // wrap the value in an array, or replace it by a copy of another node
      if (rng() % 2 == 0) {
        node = Json::array({Json(node)});
      } else {
        node = Json(*nodes[rng() % nodes.size()]);
      }
      return;
  }
}

}  // namespace

// libFuzzer's own mutator (weak: the replay build has none and never mutates).
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size,
                                                         size_t max_size);

// Structure-aware mutation (libFuzzer builds only; the replay driver never calls it): see the
// file comment. Returns the new size (<= max_size).
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937 rng(seed);
  if (rng() % 4 != 0) {
    Json j = Json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) {
      const int changes = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < changes; ++i) MutateJson(&j, rng);
      // Invalid UTF-8 in a string makes dump() throw: replace it instead.
      const std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
      if (text.size() <= max_size) {
        std::memcpy(data, text.data(), text.size());
        return text.size();
      }
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

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
