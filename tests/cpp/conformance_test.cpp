// Copyright (c) executorch-trt authors.
//
// The C++ blob and payload readers against the shared conformance vectors
// (tests/conformance/vectors.json, written by tests/conformance/make_vectors.py). The same file
// drives the Python readers (tests/py/conformance_test.py), so a check one reader makes and
// the other does not fails one of the two tests.
//
// "blob" vectors run BlobHeader::Parse (checksum included), DelegateMetadata::Parse and
// BindingPlan::Create against an engine that mirrors the metadata exactly (so only the rules
// that need no engine can fire). "payload" vectors run PortablePayload::Parse. Expected
// outcomes: "ok" (and the summary), "invalid" (Error::InvalidProgram), "incompatible"
// (Error::DelegateInvalidCompatibility).

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/binding/binding_plan.h"
#include "core/blob/blob_header.h"
#include "core/blob/delegate_metadata.h"
#include "core/blob/dtype_name.h"
#include "core/engine/portable/portable_payload.h"
#include "tests/cpp/test_util.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;
using json = nlohmann::json;

constexpr char kVectors[] = "tests/conformance/vectors.json";

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Bindings as make_vectors.py summarises them: a dynamic dimension by its symbol's name.
json Bindings(const std::vector<TensorBinding>& bindings, const std::vector<SymbolRange>& symbols) {
  json out = json::array();
  for (const TensorBinding& b : bindings) {
    json shape = json::array();
    for (size_t d = 0; d < b.shape.size(); ++d) {
      const int32_t k = b.symbol(d);
      shape.push_back(k < 0 ? json(b.shape[d]) : json(symbols[k].name));
    }
    out.push_back({b.name, DTypeName(b.dtype), shape});
  }
  return out;
}

// An engine describing exactly the metadata's bindings, reporting no alias knowledge.
testing::DescribedEngine MirrorOf(const DelegateMetadata& metadata) {
  std::vector<testing::DescribedEngine::Tensor> tensors;
  std::map<std::string, AliasReport> aliases;
  for (const TensorBinding& b : metadata.inputs) {
    tensors.push_back({b.name, TensorIOMode::kInput, b.dtype, b.shape});
  }
  for (const TensorBinding& b : metadata.outputs) {
    tensors.push_back({b.name, TensorIOMode::kOutput, b.dtype, b.shape});
    aliases[b.name] = AliasReport{AliasReport::Status::kUnknown, ""};
  }
  return testing::DescribedEngine(std::move(tensors), std::move(aliases));
}

// Runs the blob reader chain; on success fills `summary` as make_vectors.py writes it.
Error ReadBlob(const std::vector<uint8_t>& bytes, json* summary) {
  Result<BlobHeader> header = BlobHeader::Parse(bytes.data(), bytes.size());
  if (!header.ok()) {
    return header.error();
  }
  Result<DelegateMetadata> metadata = DelegateMetadata::Parse(
      header->Metadata(bytes.data()), header->required_features, header->format_version);
  if (!metadata.ok()) {
    return metadata.error();
  }
  testing::DescribedEngine engine = MirrorOf(metadata.get());
  Result<BindingPlan> plan = BindingPlan::Create(metadata.get(), engine);
  if (!plan.ok()) {
    return plan.error();
  }
  json aliases = json::array();
  for (const AliasedIo& a : metadata->aliased_io) {
    aliases.push_back(
        json::array({a.output, a.input, AliasKindName(a.kind), OwnershipName(a.ownership)}));
  }
  json symbols = json::array();
  for (const SymbolRange& s : metadata->symbols) {
    symbols.push_back(json::array({s.name, s.min, s.max, s.opt}));
  }
  *summary = {{"engine", EngineKindName(metadata->engine)},
              {"inputs", Bindings(metadata->inputs, metadata->symbols)},
              {"outputs", Bindings(metadata->outputs, metadata->symbols)},
              {"aliased_io", aliases},
              {"symbols", symbols}};
  return Error::Ok;
}

Error ReadPayload(const std::vector<uint8_t>& bytes, json* summary) {
  Result<PortablePayload> payload = PortablePayload::Parse(bytes.data(), bytes.size());
  if (!payload.ok()) {
    return payload.error();
  }
  json constants = json::array();
  for (const ConstantLayoutSpec& c : payload->constants) {
    constants.push_back({{"key", c.key},
                         {"scalar_type", static_cast<int>(c.scalar_type)},
                         {"sizes", c.sizes},
                         {"dim_order", c.dim_order}});
  }
  *summary = {{"inputs", payload->inputs},
              {"outputs", payload->outputs},
              {"constants", constants},
              {"program_size", payload->program_size}};
  return Error::Ok;
}

Error Expected(const std::string& expect) {
  if (expect == "ok") return Error::Ok;
  if (expect == "incompatible") return Error::DelegateInvalidCompatibility;
  return Error::InvalidProgram;
}

TEST(ConformanceTest, CppReadersReachTheExpectedOutcome) {
  std::ifstream file(kVectors);
  ASSERT_TRUE(file.good()) << "missing " << kVectors;
  const json doc = json::parse(file);
  const json& vectors = doc.at("vectors");
  ASSERT_GT(vectors.size(), 50u);
  for (const json& v : vectors) {
    const std::string name =
        v.at("reader").get<std::string>() + "/" + v.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = FromHex(v.at("hex").get<std::string>());
    json summary;
    const Error err =
        v.at("reader") == "blob" ? ReadBlob(bytes, &summary) : ReadPayload(bytes, &summary);
    EXPECT_EQ(static_cast<int>(err), static_cast<int>(Expected(v.at("expect"))));
    if (err == Error::Ok && v.at("expect") == "ok") {
      EXPECT_EQ(summary, v.at("summary")) << summary.dump();
    }
  }
}

}  // namespace
}  // namespace executorch_trt
