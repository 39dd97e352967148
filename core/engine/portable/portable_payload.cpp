// Copyright (c) executorch-trt authors.

#include "core/engine/portable/portable_payload.h"

#include <cinttypes>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_dimension_limit.h>
#include <executorch/runtime/platform/log.h>
#include <nlohmann/json.hpp>

#include "core/common/little_endian.h"
#include "core/common/runtime_types.h"

namespace executorch_trt {
namespace {

using executorch::runtime::kTensorDimensionLimit;
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

// One "constants" entry (docs/formats/portable_payload.md): exactly key, scalar_type, sizes,
// dim_order.
Error ParseConstant(const json& entry, ConstantLayoutSpec* out) {
  if (!entry.is_object() || entry.size() != 4 || !entry.contains("key") ||
      !entry.contains("scalar_type") || !entry.contains("sizes") || !entry.contains("dim_order")) {
    return Fail("constant entry " + entry.dump().substr(0, 200) +
                " needs exactly 'key', 'scalar_type', 'sizes' and 'dim_order'.");
  }
  const json& key = entry["key"];
  if (!key.is_string() || key.get_ref<const std::string&>().empty()) {
    return Fail("constant key " + key.dump().substr(0, 200) + " must be a non-empty string.");
  }
  out->key = key.get<std::string>();
  const json& type = entry["scalar_type"];
  if (!type.is_number_integer() || type.get<int64_t>() < 0 || type.get<int64_t>() > 127 ||
      !executorch::runtime::isValid(static_cast<ScalarType>(type.get<int64_t>()))) {
    return Fail("constant '" + out->key + "' has unknown scalar_type " + type.dump() + ".");
  }
  out->scalar_type = static_cast<ScalarType>(type.get<int64_t>());
  const json& sizes = entry["sizes"];
  const json& order = entry["dim_order"];
  if (!sizes.is_array() || !order.is_array() || sizes.size() > kTensorDimensionLimit ||
      order.size() != sizes.size()) {
    return Fail("constant '" + out->key + "' needs 'sizes' and 'dim_order' lists of the same " +
                "length, at most " + std::to_string(kTensorDimensionLimit) + ".");
  }
  size_t nbytes = executorch::runtime::elementSize(out->scalar_type);
  std::vector<bool> used(sizes.size(), false);
  for (size_t d = 0; d < sizes.size(); ++d) {
    const json& size = sizes[d];
    const json& dim = order[d];
    if (!size.is_number_integer() || size.get<int64_t>() < 0 ||
        size.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Fail("constant '" + out->key + "' has bad size " + size.dump() + ".");
    }
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0 ||
        dim.get<int64_t>() >= static_cast<int64_t>(sizes.size()) || used[dim.get<size_t>()]) {
      return Fail("constant '" + out->key + "' dim_order " + order.dump() +
                  " is not a permutation of its dimensions.");
    }
    used[dim.get<size_t>()] = true;
    out->sizes.push_back(static_cast<int32_t>(size.get<int64_t>()));
    out->dim_order.push_back(static_cast<uint8_t>(dim.get<int64_t>()));
    if (__builtin_mul_overflow(nbytes, static_cast<size_t>(out->sizes.back()), &nbytes)) {
      return Fail("constant '" + out->key + "' is larger than memory can hold.");
    }
  }
  out->nbytes = nbytes;
  return Error::Ok;
}

Error ParseConstants(const json& list, std::vector<ConstantLayoutSpec>* out) {
  if (!list.is_array()) {
    return Fail("descriptor 'constants' must be an array.");
  }
  std::set<std::string> keys;
  for (const json& entry : list) {
    ConstantLayoutSpec spec;
    Error err = ParseConstant(entry, &spec);
    if (err != Error::Ok) {
      return err;
    }
    if (!keys.insert(spec.key).second) {
      return Fail("descriptor lists constant '" + spec.key + "' twice.");
    }
    out->push_back(std::move(spec));
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
  if (version < kPortablePayloadMinVersion || version > kPortablePayloadVersion) {
    ET_LOG(Error,
           "executorch_trt: portable engine payload version %" PRIu32
           ", this runtime reads versions %" PRIu32 " to %" PRIu32
           "; re-export with a matching version.",
           version, kPortablePayloadMinVersion, kPortablePayloadVersion);
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
    if (it.key() != "inputs" && it.key() != "outputs" && (it.key() != "constants" || version < 3)) {
      // Version 1 carried "aliases" here; later versions keep them only in the blob metadata.
      return Fail("descriptor has unknown key '" + it.key() + "'; version " +
                  std::to_string(version) + " has only 'inputs', 'outputs'" +
                  (version >= 3 ? " and 'constants'." : "."));
    }
  }
  PortablePayload payload;
  std::set<std::string> seen;
  Error err = ParseNames(root, "inputs", &payload.inputs, &seen);
  if (err == Error::Ok) {
    err = ParseNames(root, "outputs", &payload.outputs, &seen);
  }
  if (err == Error::Ok && root.contains("constants")) {
    err = ParseConstants(root["constants"], &payload.constants);
  }
  if (err != Error::Ok) {
    return err;
  }
  payload.program = data + program_offset;
  payload.program_size = static_cast<size_t>(program_size);
  return payload;
}

}  // namespace executorch_trt
