// Copyright (c) executorch-trt authors.

#include "extension/llm/llm_metadata.h"

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/executor/method.h>

#include "core/common/error_text.h"

namespace executorch_trt::extension::llm {
namespace {

// An integer scalar's value in a one-element tensor of an integer or bool dtype.
bool TensorScalar(const Tensor& t, int64_t* value) {
  if (t.numel() != 1) {
    return false;
  }
  switch (t.scalar_type()) {
    case ScalarType::Long:
      *value = t.const_data_ptr<int64_t>()[0];
      return true;
    case ScalarType::Int:
      *value = t.const_data_ptr<int32_t>()[0];
      return true;
    case ScalarType::Short:
      *value = t.const_data_ptr<int16_t>()[0];
      return true;
    case ScalarType::Char:
      *value = t.const_data_ptr<int8_t>()[0];
      return true;
    case ScalarType::Byte:
      *value = t.const_data_ptr<uint8_t>()[0];
      return true;
    case ScalarType::Bool:
      *value = t.const_data_ptr<bool>()[0] ? 1 : 0;
      return true;
    default:
      return false;
  }
}

bool ScalarValue(const EValue& v, int64_t* value) {
  if (v.isInt()) {
    *value = v.toInt();
    return true;
  }
  if (v.isBool()) {
    *value = v.toBool() ? 1 : 0;
    return true;
  }
  return v.isTensor() && TensorScalar(v.toTensor(), value);
}

}  // namespace

bool IsLlmMetadataMethod(const std::string& method) {
  for (const char* name : {kMaxSeqLen, kMaxContextLen, kVocabSize, kBosId, kEosIds, kUseKvCache,
                           kEnableDynamicShape}) {
    if (method == name) {
      return true;
    }
  }
  return false;
}

Error ReadLlmMetadata(LoadedProgram& program, const std::string& what, LlmMetadata* out,
                      std::string* error) {
  for (const std::string& name : program.method_names()) {
    if (!IsLlmMetadataMethod(name)) {
      continue;
    }
    executorch::runtime::Method* method = program.method(name);
    const Error err = method->execute();
    if (err != Error::Ok) {
      *error = what + ": metadata method " + name + " failed (error " + ErrorText(err) + ")";
      return err;
    }
    std::vector<int64_t> values;
    for (size_t i = 0; i < method->outputs_size(); ++i) {
      int64_t value = 0;
      if (!ScalarValue(method->get_output(i), &value)) {
        *error = what + ": metadata method " + name + " returns something other than an integer " +
                 "(output " + std::to_string(i) + "); the LLM runner reads integer scalars";
        return Error::InvalidProgram;
      }
      values.push_back(value);
    }
    if (name == kEosIds) {
      out->eos_ids = values;
      continue;
    }
    if (values.empty()) {
      *error = what + ": metadata method " + name + " returns nothing";
      return Error::InvalidProgram;
    }
    const int64_t value = values.front();
    if (name == kMaxSeqLen) {
      out->max_seq_len = value;
    } else if (name == kMaxContextLen) {
      out->max_context_len = value;
    } else if (name == kVocabSize) {
      out->vocab_size = value;
    } else if (name == kBosId) {
      out->bos_id = value;
    } else if (name == kUseKvCache) {
      out->use_kv_cache = value != 0;
    } else {
      out->enable_dynamic_shape = value != 0;
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::extension::llm
