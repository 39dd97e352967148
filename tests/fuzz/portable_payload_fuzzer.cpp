// Copyright (c) executorch-trt authors.
//
// portable_payload_fuzzer: the payload of a "portable" blob (docs/formats/portable_payload.md)
// on arbitrary bytes: PortablePayload::Parse, and for an accepted payload the whole
// PortableEngine load (nested program verification, method metadata, memory planning,
// load_method) and the description of its bindings. An accepted payload must place the nested
// program inside the input, 16-byte aligned relative to it, with unique binding names.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/engine/portable/portable_engine.h"
#include "core/engine/portable/portable_payload.h"
#include "tests/fuzz/fuzz_support.h"

using executorch_trt::PortableEngine;
using executorch_trt::PortablePayload;
using executorch_trt::fuzz::Check;

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  executorch_trt::fuzz::InitRuntimeForFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An aligned copy: the engine loads the nested program in place when it is 16-aligned.
  std::vector<uint8_t> bytes(data, data + size);
  executorch::runtime::Result<PortablePayload> payload =
      PortablePayload::Parse(bytes.data(), bytes.size());
  if (!payload.ok()) return 0;
  const uint8_t* begin = bytes.data();
  Check(payload->program >= begin && payload->program_size <= bytes.size() &&
            static_cast<size_t>(payload->program - begin) <= bytes.size() - payload->program_size,
        "nested program inside the payload");
  Check((payload->program - begin) % 16 == 0, "nested program 16-byte aligned");
  std::set<std::string> names;
  for (const auto* list : {&payload->inputs, &payload->outputs}) {
    for (const std::string& name : *list) {
      Check(!name.empty(), "binding names are non-empty");
      Check(names.insert(name).second, "binding names are unique");
    }
  }
  executorch::runtime::Result<std::unique_ptr<PortableEngine>> engine =
      PortableEngine::Create(bytes.data(), bytes.size(), /*named_data=*/nullptr);
  if (!engine.ok()) return 0;
  const int32_t n = engine.get()->NumIOTensors();
  Check(static_cast<size_t>(n) == payload->inputs.size() + payload->outputs.size(),
        "one engine binding per descriptor name");
  for (int32_t i = 0; i < n; ++i) {
    const std::string name = engine.get()->IOTensorName(i);
    Check(names.count(name) == 1, "engine bindings are the descriptor's names");
    Check(engine.get()->TensorShape(name).ok() && engine.get()->TensorDType(name).ok(),
          "every binding has a shape and a dtype");
  }
  return 0;
}
