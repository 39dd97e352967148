// Copyright (c) executorch-trt authors.

#include "core/engine/portable_payload.h"

#include <cinttypes>
#include <cstring>
#include <set>
#include <string_view>

#include <executorch/runtime/platform/log.h>
#include <nlohmann/json.hpp>

#include "core/common/little_endian.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;
using json = nlohmann::json;

Error Fail(const std::string& message) {
  ET_LOG(Error, "executorch_trt: portable engine payload: %s", message.c_str());
  return Error::InvalidProgram;
}

Error ParseNames(const json& root, const char* key, std::vector<std::string>* out,
                 std::set<std::string>* seen) {
  auto list = root.find(key);
  if (list == root.end() || !list->is_array()) {
    return Fail(std::string("descriptor '") + key + "' must be an array of names.");
  }
  for (const json& name : *list) {
    if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
      return Fail(std::string("descriptor '") + key + "' has entry " + name.dump() +
                  "; names must be non-empty strings.");
    }
    const std::string& s = name.get_ref<const std::string&>();
    if (!seen->insert(s).second) {
      return Fail("descriptor names binding '" + s + "' twice; names must be unique.");
    }
    out->push_back(s);
  }
  return Error::Ok;
}

}  // namespace

Result<PortablePayload> PortablePayload::Parse(const uint8_t* data, size_t size) {
  if (data == nullptr || size < kPortablePayloadHeaderSize) {
    return Fail("payload is " + std::to_string(size) + " bytes, shorter than its " +
                std::to_string(kPortablePayloadHeaderSize) + "-byte header.");
  }
  if (std::memcmp(data + kPortablePayloadOffsetMagic, kPortablePayloadMagic,
                  sizeof(kPortablePayloadMagic)) != 0) {
    return Fail(
        "magic is not 'ETPE'; the blob says engine 'portable' but carries "
        "something else.");
  }
  const uint32_t version = ReadU32(data + kPortablePayloadOffsetVersion);
  if (version != kPortablePayloadVersion) {
    ET_LOG(Error,
           "executorch_trt: portable engine payload version %" PRIu32
           ", this runtime reads version %" PRIu32 "; re-export with a matching version.",
           version, kPortablePayloadVersion);
    return Error::DelegateInvalidCompatibility;
  }
  const uint64_t descriptor_size = ReadU64(data + kPortablePayloadOffsetDescriptorSize);
  const uint64_t program_offset = ReadU64(data + kPortablePayloadOffsetProgramOffset);
  const uint64_t program_size = ReadU64(data + kPortablePayloadOffsetProgramSize);
  const uint64_t avail = size - kPortablePayloadHeaderSize;
  if (descriptor_size > avail) {
    return Fail("descriptor_size " + std::to_string(descriptor_size) +
                " runs past the end of the " + std::to_string(size) + "-byte payload.");
  }
  const uint64_t descriptor_end = kPortablePayloadHeaderSize + descriptor_size;
  if (program_offset < descriptor_end || program_offset > size ||
      program_size > size - program_offset) {
    return Fail("program [offset " + std::to_string(program_offset) + ", size " +
                std::to_string(program_size) + ") overlaps the descriptor (ends at " +
                std::to_string(descriptor_end) + ") or runs past the " + std::to_string(size) +
                "-byte payload.");
  }
  if (program_offset % 16 != 0) {
    return Fail("program_offset " + std::to_string(program_offset) + " is not 16-byte aligned.");
  }
  const char* text = reinterpret_cast<const char*>(data + kPortablePayloadHeaderSize);
  json root = json::parse(text, text + descriptor_size, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Fail("descriptor is not a JSON object.");
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() != "inputs" && it.key() != "outputs") {
      // Version 1 carried "aliases" here; version 2 keeps them only in the blob metadata.
      return Fail("descriptor has unknown key '" + it.key() +
                  "'; version 2 has only 'inputs' and 'outputs'.");
    }
  }
  PortablePayload payload;
  std::set<std::string> seen;
  Error err = ParseNames(root, "inputs", &payload.inputs, &seen);
  if (err == Error::Ok) {
    err = ParseNames(root, "outputs", &payload.outputs, &seen);
  }
  if (err != Error::Ok) {
    return err;
  }
  payload.program = data + program_offset;
  payload.program_size = static_cast<size_t>(program_size);
  return payload;
}

}  // namespace executorch_trt
