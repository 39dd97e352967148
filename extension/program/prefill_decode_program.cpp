// Copyright (c) executorch-trt authors.

#include "extension/program/prefill_decode_program.h"

#include <utility>

#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include "core/common/error_text.h"

namespace executorch_trt::extension {
namespace {

using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::MethodMeta;
using executorch::runtime::Result;

// Also the method's index in the LoadedProgram: Load() loads the methods in Phase order.
size_t PhaseIndex(Phase phase) { return static_cast<size_t>(phase); }

executorch::extension::TensorPtr FloatTensorPtr(const FloatTensor& t) {
  std::vector<executorch::aten::SizesType> sizes(t.shape.begin(), t.shape.end());
  return executorch::extension::make_tensor_ptr(std::move(sizes), std::vector<float>(t.data));
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPrefill:
      return "prefill";
    case Phase::kDecode:
      return "decode";
    case Phase::kEncode:
      return "encode";
  }
  return "?";
}

PrefillDecodeProgram::~PrefillDecodeProgram() = default;

Result<std::unique_ptr<PrefillDecodeProgram>> PrefillDecodeProgram::Load(
    const std::string& path, const std::vector<CacheBuffer>& caches, std::string* error,
    bool encoder, const std::string& data_path) {
  std::vector<std::string> names = {PhaseName(Phase::kPrefill), PhaseName(Phase::kDecode)};
  if (encoder) {
    names.push_back(PhaseName(Phase::kEncode));
  }
  Result<std::unique_ptr<LoadedProgram>> loaded =
      LoadedProgram::LoadFile(path, names, error, data_path);
  if (!loaded.ok()) {
    return loaded.error();
  }
  std::unique_ptr<PrefillDecodeProgram> p(new PrefillDecodeProgram());
  p->program_ = std::move(loaded.get());
  p->caches_ = caches;
  for (size_t i = 0; i < names.size(); ++i) {
    p->methods_[i] = p->program_->method(names[i]);
  }
  for (size_t i = 0; i < caches.size(); ++i) {
    const CacheBuffer& cache = caches[i];
    for (size_t j = 0; j < i; ++j) {
      if (caches[j].name == cache.name) {
        *error = path + ": cache '" + cache.name + "' is listed twice (" + std::to_string(j) +
                 " and " + std::to_string(i) + "); list each buffer once";
        return Error::InvalidArgument;
      }
    }
    if (p->program_->find_buffer(cache.name) == nullptr) {
      *error = path + ": " + p->program_->UnknownBufferMessage(cache.name) +
               " (none: export with emit_mutable_buffer_names=True; else the names belong to "
               "another model)";
      return Error::NotFound;
    }
    for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {  // the encoder holds no caches
      Result<Tensor> t = p->program_->buffer_tensor(PhaseIndex(phase), cache.name);
      if (!t.ok()) {
        *error = path + ": method '" + PhaseName(phase) + "' has no buffer '" + cache.name +
                 "'; prefill and decode must share every cache";
        return t.error();
      }
      if (t->scalar_type() != executorch::aten::ScalarType::Float || t->numel() != cache.numel) {
        *error = path + ": buffer '" + cache.name + "' has " + std::to_string(t->numel()) +
                 " elements of dtype " + executorch::runtime::toString(t->scalar_type()) +
                 ", expected " + std::to_string(cache.numel) + " float32";
        return Error::InvalidProgram;
      }
      p->cache_tensors_[PhaseIndex(phase)].push_back(t.get());
    }
  }
  return p;
}

const Tensor& PrefillDecodeProgram::cache(Phase phase, size_t index) const {
  return cache_tensors_[PhaseIndex(phase)][index];
}

MethodMeta PrefillDecodeProgram::method_meta(Phase phase) const {
  return methods_[PhaseIndex(phase)]->method_meta();
}

Error PrefillDecodeProgram::BindCaches(std::vector<std::vector<float>>* memory,
                                       std::string* error) {
  if (memory == nullptr) {
    *error = "binding memory: no buffers given (null)";
    return Error::InvalidArgument;
  }
  if (memory->size() != caches_.size()) {
    *error = "binding memory: " + std::to_string(memory->size()) + " buffers for " +
             std::to_string(caches_.size()) + " caches";
    return Error::InvalidArgument;
  }
  for (size_t i = 0; i < caches_.size(); ++i) {
    if (static_cast<int64_t>((*memory)[i].size()) != caches_[i].numel) {
      *error = "binding memory: " + std::to_string((*memory)[i].size()) + " floats for cache '" +
               caches_[i].name + "' of " + std::to_string(caches_[i].numel);
      return Error::InvalidArgument;
    }
  }
  // All in one call: memory freed since the last bind may be reused by the new one, and
  // binding one cache at a time would see it overlap another cache's old storage.
  std::vector<BufferBinding> bindings;
  for (size_t i = 0; i < caches_.size(); ++i) {
    std::vector<float>& buffer = (*memory)[i];
    bindings.push_back({caches_[i].name, buffer.data(), buffer.size() * sizeof(float)});
  }
  return program_->BindBuffers(bindings, error);
}

Error PrefillDecodeProgram::Encode(const FloatTensor& features, FloatTensor* states,
                                   std::string* error) {
  if (!has_encoder()) {
    *error = "the program was loaded without its encode method";
    return Error::InvalidState;
  }
  executorch::runtime::Method& method = *methods_[PhaseIndex(Phase::kEncode)];
  auto input = FloatTensorPtr(features);
  Error err = method.set_input(executorch::runtime::EValue(*input), 0);
  if (err == Error::Ok) {
    err = method.execute();
  }
  if (err != Error::Ok) {
    *error = "encode failed with error " + ErrorText(err);
    return err;
  }
  if (method.outputs_size() == 0 || !method.get_output(0).isTensor() ||
      method.get_output(0).toTensor().scalar_type() != executorch::aten::ScalarType::Float) {
    *error = "encode returned no float32 tensor";
    return Error::InvalidProgram;
  }
  const Tensor out = method.get_output(0).toTensor();
  states->shape.assign(out.sizes().begin(), out.sizes().end());
  states->data.assign(out.const_data_ptr<float>(), out.const_data_ptr<float>() + out.numel());
  return Error::Ok;
}

Error PrefillDecodeProgram::Prefill(const std::vector<int64_t>& prompt, std::vector<float>* logits,
                                    std::string* error, const FloatTensor* context) {
  return Run(Phase::kPrefill, prompt, 0, context, logits, error);
}

Error PrefillDecodeProgram::Decode(int64_t token, int64_t position, std::vector<float>* logits,
                                   std::string* error, const FloatTensor* context) {
  return Run(Phase::kDecode, {token}, position, context, logits, error);
}

Error PrefillDecodeProgram::Run(Phase phase, const std::vector<int64_t>& tokens, int64_t start,
                                const FloatTensor* context, std::vector<float>* logits,
                                std::string* error) {
  executorch::runtime::Method& method = *methods_[PhaseIndex(phase)];
  const auto n = static_cast<executorch::aten::SizesType>(tokens.size());
  std::vector<int64_t> positions(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    positions[i] = start + static_cast<int64_t>(i);
  }
  auto ids = executorch::extension::make_tensor_ptr({1, n}, std::vector<int64_t>(tokens));
  auto pos = executorch::extension::make_tensor_ptr({n}, std::move(positions));
  Error err = method.set_input(executorch::runtime::EValue(*ids), 0);
  if (err == Error::Ok) {
    err = method.set_input(executorch::runtime::EValue(*pos), 1);
  }
  executorch::extension::TensorPtr states;
  if (err == Error::Ok && context != nullptr) {
    states = FloatTensorPtr(*context);
    err = method.set_input(executorch::runtime::EValue(*states), 2);
  }
  if (err == Error::Ok) {
    err = method.execute();
  }
  if (err != Error::Ok) {
    *error = std::string(PhaseName(phase)) + " failed with error " + ErrorText(err);
    return err;
  }
  if (method.outputs_size() == 0 || !method.get_output(0).isTensor()) {
    *error = "the method returned no logits tensor";
    return Error::InvalidProgram;
  }
  const Tensor out = method.get_output(0).toTensor();
  if (out.scalar_type() != executorch::aten::ScalarType::Float || out.dim() != 3 ||
      out.size(1) != n) {
    *error = "logits must be float32 [1, " + std::to_string(n) + ", V]";
    return Error::InvalidProgram;
  }
  const int64_t vocab = out.size(2);
  const float* data = out.const_data_ptr<float>() + (n - 1) * vocab;
  logits->assign(data, data + vocab);
  return Error::Ok;
}

}  // namespace executorch_trt::extension
