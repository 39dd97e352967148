// Copyright (c) executorch-trt authors.

#include "examples/prefill_decode_program.h"

#include <algorithm>
#include <utility>

#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

namespace executorch_trt::examples {
namespace {

using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::MethodMeta;
using executorch::runtime::Result;

// Planned buffers shared between methods, as Module(share_memory_arenas=true) shares them:
// mem_id 1 (activations) and mem_id 2 (mutable buffers shared with share_mutable_buffers).
constexpr size_t kSharedPlannedBuffers = 2;

std::string ErrorCode(Error err) { return std::to_string(static_cast<int>(err)); }

// The names of `method`'s named mutable buffers (MethodMeta attributes), quoted and
// comma-separated, or "none".
std::string AttributeNames(const MethodMeta& meta) {
  std::string names;
  for (size_t i = 0; i < meta.num_attributes(); ++i) {
    auto info = meta.attribute_tensor_meta(i);
    if (info.ok()) {
      names += (names.empty() ? "'" : ", '") + std::string(info->name()) + "'";
    }
  }
  return names.empty() ? "none" : names;
}

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
    bool encoder) {
  std::unique_ptr<PrefillDecodeProgram> p(new PrefillDecodeProgram());
  Result<executorch::extension::FileDataLoader> loader =
      executorch::extension::FileDataLoader::from(path.c_str());
  Error err = loader.error();
  if (loader.ok()) {
    p->loader_ = std::make_unique<executorch::extension::FileDataLoader>(std::move(loader.get()));
    Result<executorch::runtime::Program> program = executorch::runtime::Program::load(
        p->loader_.get(), executorch::runtime::Program::Verification::InternalConsistency);
    err = program.error();
    if (program.ok()) {
      p->program_ = std::make_unique<executorch::runtime::Program>(std::move(program.get()));
    }
  }
  if (err != Error::Ok) {
    *error =
        path + ": not a loadable ExecuTorch program (error " + ErrorCode(err) + "); re-export it";
    return err;
  }
  p->caches_ = caches;
  std::vector<Phase> phases = {Phase::kPrefill, Phase::kDecode};
  if (encoder) {
    phases.push_back(Phase::kEncode);
  }
  for (Phase phase : phases) {
    err = p->LoadMethod(phase, path, caches, error);
    if (err != Error::Ok) {
      return err;
    }
  }
  return p;
}

Error PrefillDecodeProgram::AllocateSharedArenas() {
  std::vector<size_t> sizes;
  for (size_t m = 0; m < program_->num_methods(); ++m) {
    Result<const char*> name = program_->get_method_name(m);
    if (!name.ok()) {
      return name.error();
    }
    Result<MethodMeta> meta = program_->method_meta(name.get());
    if (!meta.ok()) {
      return meta.error();
    }
    const size_t shared = std::min(meta->num_memory_planned_buffers(), kSharedPlannedBuffers);
    sizes.resize(std::max(sizes.size(), shared), 0);
    for (size_t i = 0; i < shared; ++i) {
      Result<int64_t> size = meta->memory_planned_buffer_size(i);
      if (!size.ok()) {
        return size.error();
      }
      if (size.get() < 0) {
        return Error::InvalidProgram;
      }
      sizes[i] = std::max(sizes[i], static_cast<size_t>(size.get()));
    }
  }
  for (size_t size : sizes) {
    shared_arenas_.emplace_back(size);  // zeroed
  }
  return Error::Ok;
}

Error PrefillDecodeProgram::LoadIntoSharedArenas(Phase phase) {
  const char* name = PhaseName(phase);
  LoadedMethod& m = methods_[PhaseIndex(phase)];
  Result<MethodMeta> meta = program_->method_meta(name);
  if (!meta.ok()) {
    return meta.error();
  }
  if (shared_arenas_.empty()) {
    const Error err = AllocateSharedArenas();
    if (err != Error::Ok) {
      return err;
    }
  }
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    if (!size.ok()) {
      return size.error();
    }
    if (size.get() < 0) {
      return Error::InvalidProgram;
    }
    if (i < shared_arenas_.size()) {
      m.planned_spans.emplace_back(shared_arenas_[i].data(), shared_arenas_[i].size());
    } else {
      m.own_buffers.emplace_back(static_cast<size_t>(size.get()));  // zeroed
      m.planned_spans.emplace_back(m.own_buffers.back().data(), m.own_buffers.back().size());
    }
  }
  m.planned_memory = std::make_unique<executorch::runtime::HierarchicalAllocator>(
      executorch::runtime::Span<executorch::runtime::Span<uint8_t>>(m.planned_spans.data(),
                                                                    m.planned_spans.size()));
  m.memory_manager = std::make_unique<executorch::runtime::MemoryManager>(
      &method_allocator_, m.planned_memory.get(), &temp_allocator_);
  Result<executorch::runtime::Method> method = program_->load_method(name, m.memory_manager.get());
  if (!method.ok()) {
    return method.error();
  }
  m.method = std::make_unique<executorch::runtime::Method>(std::move(method.get()));
  return Error::Ok;
}

Error PrefillDecodeProgram::LoadMethod(Phase phase, const std::string& path,
                                       const std::vector<CacheBuffer>& caches, std::string* error) {
  const Error err = LoadIntoSharedArenas(phase);
  if (err != Error::Ok) {
    *error = path + ": cannot load method '" + PhaseName(phase) + "' (error " + ErrorCode(err) +
             "): the program has no such method, or a delegate in it failed to initialise "
             "(see the log above; a corrupted blob is rejected here)";
    return err;
  }
  LoadedMethod& m = methods_[PhaseIndex(phase)];
  if (phase == Phase::kEncode) {
    return Error::Ok;  // the encoder holds no caches
  }
  for (const CacheBuffer& cache : caches) {
    Result<Tensor> t = m.method->get_attribute(cache.name);
    if (!t.ok()) {
      *error = path + ": no mutable buffer named '" + cache.name +
               "'; the program's named buffers are: " + AttributeNames(m.method->method_meta()) +
               " (none: export with emit_mutable_buffer_names=True; else the names belong "
               "to another model)";
      return t.error();
    }
    if (t->scalar_type() != executorch::aten::ScalarType::Float || t->numel() != cache.numel) {
      *error = path + ": buffer '" + cache.name + "' has " + std::to_string(t->numel()) +
               " elements of dtype " + executorch::runtime::toString(t->scalar_type()) +
               ", expected " + std::to_string(cache.numel) + " float32";
      return Error::InvalidProgram;
    }
    m.caches.push_back(t.get());
  }
  return Error::Ok;
}

const Tensor& PrefillDecodeProgram::cache(Phase phase, size_t index) const {
  return methods_[PhaseIndex(phase)].caches[index];
}

MethodMeta PrefillDecodeProgram::method_meta(Phase phase) const {
  return methods_[PhaseIndex(phase)].method->method_meta();
}

Error PrefillDecodeProgram::BindCaches(std::vector<std::vector<float>>* memory,
                                       std::string* error) {
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
  for (const LoadedMethod& m : methods_) {  // encode's has no caches
    for (size_t i = 0; i < m.caches.size(); ++i) {
      std::vector<float>& buffer = (*memory)[i];
      const Error err = executorch::runtime::internal::set_tensor_data(
          m.caches[i], buffer.data(), buffer.size() * sizeof(float));
      if (err != Error::Ok) {
        *error = "binding session memory to cache " + std::to_string(i) + " failed";
        return err;
      }
    }
  }
  return Error::Ok;
}

Error PrefillDecodeProgram::Encode(const FloatTensor& features, FloatTensor* states,
                                   std::string* error) {
  if (!has_encoder()) {
    *error = "the program was loaded without its encode method";
    return Error::InvalidState;
  }
  executorch::runtime::Method& method = *methods_[PhaseIndex(Phase::kEncode)].method;
  auto input = FloatTensorPtr(features);
  Error err = method.set_input(executorch::runtime::EValue(*input), 0);
  if (err == Error::Ok) {
    err = method.execute();
  }
  if (err != Error::Ok) {
    *error = "encode failed with error " + ErrorCode(err);
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
  executorch::runtime::Method& method = *methods_[PhaseIndex(phase)].method;
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
    *error = std::string(PhaseName(phase)) + " failed with error " + ErrorCode(err);
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

}  // namespace executorch_trt::examples
