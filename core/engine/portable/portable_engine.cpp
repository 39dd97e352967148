// Copyright (c) executorch-trt authors.

#include "core/engine/portable/portable_engine.h"

#include <cinttypes>
#include <cstring>
#include <utility>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/platform/log.h>

#include "core/common/num_bytes.h"
#include "core/common/runtime_types.h"
#include "core/common/shape_string.h"
#include "core/engine/portable/constant_layouts_data_map.h"
#include "core/engine/portable/empty_named_data_map.h"
#include "core/engine/portable/huge_pages.h"
#include "core/engine/portable/nested_delegate_checks.h"
#include "core/engine/portable/nested_program_checks.h"
#include "core/engine/portable/portable_payload.h"

namespace executorch_trt {
namespace {

using executorch::runtime::MethodMeta;

// The nested method's named data when the program has none (empty_named_data_map.h).
const EmptyNamedDataMap kNoNamedData;
using executorch::runtime::Tag;
using executorch::runtime::TensorInfo;

constexpr const char* kMethodName = "forward";

void ContiguousStrides(const std::vector<int32_t>& sizes, std::vector<int32_t>* strides) {
  strides->assign(sizes.size(), 1);
  for (size_t i = sizes.size(); i > 1; --i) {
    (*strides)[i - 2] = (*strides)[i - 1] * sizes[i - 1];
  }
}

// One short line per cause: ExecuTorch truncates a long log line.
void LogMethodLoadFailure(Error err) {
  ET_LOG(Error,
         "executorch_trt: portable engine: loading the nested method failed (error "
         "0x%" PRIx32 ").",
         static_cast<uint32_t>(err));
  if (err == Error::OperatorMissing) {
    ET_LOG(Error,
           "executorch_trt: link the kernels the partition uses "
           "(libexecutorch_kernels_optimized.so, libexecutorch_trt.so).");
  } else if (err == Error::NotFound) {
    ET_LOG(Error,
           "executorch_trt: a weight's key (logged above) is not in the program's data: "
           "load the program with its .ptd (external_weights=True).");
  }
}

}  // namespace

PortableEngine::~PortableEngine() = default;

Result<std::unique_ptr<PortableEngine>> PortableEngine::Create(
    const uint8_t* payload, size_t size, const executorch::runtime::NamedDataMap* named_data) {
  std::unique_ptr<PortableEngine> engine(new (std::nothrow) PortableEngine());
  if (engine == nullptr) {
    return Error::MemoryAllocationFailed;
  }
  Error err = engine->Load(payload, size, named_data);
  if (err != Error::Ok) {
    return err;  // `engine` and everything it loaded are freed here
  }
  return engine;
}

Error PortableEngine::Load(const uint8_t* payload_bytes, size_t size,
                           const executorch::runtime::NamedDataMap* named_data) {
  Result<PortablePayload> payload = PortablePayload::Parse(payload_bytes, size);
  if (!payload.ok()) {
    return payload.error();
  }
  Error err = LoadProgram(*payload);
  if (err != Error::Ok) {
    return err;
  }
  Result<MethodMeta> meta = program_->method_meta(kMethodName);
  if (!meta.ok()) {
    ET_LOG(Error, "executorch_trt: portable engine: the nested program has no method '%s'.",
           kMethodName);
    return Error::InvalidProgram;
  }
  err = DescribeBindings(*meta, *payload);
  if (err == Error::Ok) {
    err = AllocatePlannedMemory(*meta);
  }
  if (err == Error::Ok) {
    err = PrepareNamedData(named_data, std::move(payload->constants));
  }
  if (err == Error::Ok) {
    err = LoadMethod();
  }
  return err;
}

Error PortableEngine::LoadProgram(const PortablePayload& payload) {
  program_data_ = payload.program;
  program_size_ = payload.program_size;
  if (reinterpret_cast<uintptr_t>(program_data_) % 16 != 0) {
    // new[] storage is aligned for any fundamental type (16 bytes on x86-64/aarch64).
    owned_program_.assign(program_data_, program_data_ + program_size_);
    program_data_ = owned_program_.data();
  }
  loader_ = std::make_unique<executorch::extension::BufferDataLoader>(program_data_, program_size_);
  // InternalConsistency runs the flatbuffer verifier over the whole nested program, so a
  // corrupted program (offsets, vector lengths, tables) is rejected here instead of
  // crashing at load_method or execute. The blob checksum (docs/formats/delegate_blob.md) catches
  // corruption first; this also covers blobs from writers without it.
  Result<executorch::runtime::Program> program = executorch::runtime::Program::load(
      loader_.get(), executorch::runtime::Program::Verification::InternalConsistency);
  if (!program.ok()) {
    ET_LOG(Error,
           "executorch_trt: portable engine: the nested program (%zu bytes) does not load "
           "(error 0x%" PRIx32
           "); the blob is corrupt or from an incompatible "
           "ExecuTorch.",
           program_size_, static_cast<uint32_t>(program.error()));
    return program.error();
  }
  // ExecuTorch's loader does not range-check the execution plan (an operator index past the
  // table crashes at execute; nested_program_checks.h).
  const Error checked = CheckNestedProgram(program_data_, program_size_, kMethodName);
  if (checked != Error::Ok) {
    return checked;
  }
  program_ = std::make_unique<executorch::runtime::Program>(std::move(program.get()));
  return Error::Ok;
}

Error PortableEngine::DescribeBindings(const MethodMeta& meta, const PortablePayload& payload) {
  if (meta.num_inputs() != payload.inputs.size() || meta.num_outputs() != payload.outputs.size()) {
    ET_LOG(Error,
           "executorch_trt: portable engine: the descriptor names %zu inputs and %zu "
           "outputs but the nested method has %zu inputs and %zu outputs; the blob "
           "writer is broken, re-export.",
           payload.inputs.size(), payload.outputs.size(), meta.num_inputs(), meta.num_outputs());
    return Error::InvalidProgram;
  }
  const size_t num_inputs = payload.inputs.size();
  for (size_t i = 0; i < num_inputs + payload.outputs.size(); ++i) {
    const bool is_input = i < num_inputs;
    const size_t index = is_input ? i : i - num_inputs;
    Binding b;
    b.name = is_input ? payload.inputs[index] : payload.outputs[index];
    b.mode = is_input ? TensorIOMode::kInput : TensorIOMode::kOutput;
    b.method_index = index;
    const Error err = DescribeTensor(meta, &b);
    if (err != Error::Ok) {
      return err;
    }
    index_by_name_.emplace(b.name, bindings_.size());
    bindings_.push_back(std::move(b));
  }
  return Error::Ok;
}

Error PortableEngine::DescribeTensor(const MethodMeta& meta, Binding* b) {
  const bool is_input = b->mode == TensorIOMode::kInput;
  const size_t index = b->method_index;
  Result<Tag> tag = is_input ? meta.input_tag(index) : meta.output_tag(index);
  if (!tag.ok() || tag.get() != Tag::Tensor) {
    ET_LOG(Error,
           "executorch_trt: portable engine: nested %s %zu ('%s') is not a tensor; "
           "engine bindings must be tensors.",
           is_input ? "input" : "output", index, b->name.c_str());
    return Error::InvalidProgram;
  }
  Result<TensorInfo> info =
      is_input ? meta.input_tensor_meta(index) : meta.output_tensor_meta(index);
  if (!info.ok()) {
    return info.error();
  }
  if (info->is_memory_planned()) {
    ET_LOG(Error,
           "executorch_trt: portable engine: nested %s '%s' is memory-planned, so it "
           "cannot share the caller's storage; export the nested program with "
           "MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False).",
           is_input ? "input" : "output", b->name.c_str());
    return Error::InvalidProgram;
  }
  b->dtype = info->scalar_type();
  const Span<const int32_t> sizes = info->sizes();
  const Span<const uint8_t> dim_order = info->dim_order();
  for (size_t d = 0; d < sizes.size(); ++d) {
    b->shape.push_back(sizes[d]);
    b->runtime_sizes.push_back(sizes[d]);
    if (dim_order.size() != sizes.size() || dim_order[d] != d) {
      ET_LOG(Error,
             "executorch_trt: portable engine: nested binding '%s' has a non-contiguous "
             "dim order; only contiguous tensors are supported.",
             b->name.c_str());
      return Error::InvalidProgram;
    }
    b->dim_order.push_back(static_cast<uint8_t>(d));
  }
  ContiguousStrides(b->runtime_sizes, &b->strides);
  b->nbytes = info->nbytes();
  b->runtime_nbytes = b->nbytes;
  return Error::Ok;
}

Error PortableEngine::AllocatePlannedMemory(const MethodMeta& meta) {
  // Planned buffers sized per MethodMeta, malloc for method-lifetime data.
  for (size_t i = 0; i < meta.num_memory_planned_buffers(); ++i) {
    Result<int64_t> buffer_size = meta.memory_planned_buffer_size(i);
    if (!buffer_size.ok() || buffer_size.get() < 0) {
      return Error::InvalidProgram;
    }
    const size_t n = static_cast<size_t>(buffer_size.get());
    planned_buffers_.emplace_back(new (std::nothrow) uint8_t[n > 0 ? n : 1]);
    if (planned_buffers_.back() == nullptr) {
      return Error::MemoryAllocationFailed;
    }
    planned_spans_.emplace_back(planned_buffers_.back().get(), n);
  }
  planned_memory_ = std::make_unique<executorch::runtime::HierarchicalAllocator>(
      Span<Span<uint8_t>>(planned_spans_.data(), planned_spans_.size()));
  memory_manager_ = std::make_unique<executorch::runtime::MemoryManager>(
      &method_allocator_, planned_memory_.get(), &temp_allocator_);
  return Error::Ok;
}

Error PortableEngine::PrepareNamedData(const executorch::runtime::NamedDataMap* named_data,
                                       std::vector<ConstantLayoutSpec> constants) {
  // The outer program's named data, plus the layouts of the nested method's external
  // constants (constant_layouts_data_map.h).
  data_map_ = std::make_unique<ConstantLayoutsDataMap>(
      named_data != nullptr ? named_data : &kNoNamedData, std::move(constants));
  // ExecuTorch's XnnpackBackend does not compare a constant's dims with its data size
  // (nested_delegate_checks.h): check the nested XNNPACK delegates before they are compiled.
  return CheckNestedXnnpackDelegates(program_data_, program_size_, kMethodName, data_map_.get());
}

Error PortableEngine::LoadMethod() {
  // XNNPACK's weight cache (ExecuTorch's "weight_cache_enabled" XnnpackBackend option): the
  // nested XNNPACK delegates of every method and partition share the weights they pack, by
  // named-data key, instead of each packing its own copy (the cache is process-wide and
  // reference-counted per weight in ExecuTorch 1.5.1).
  executorch::runtime::BackendOptions<1> xnnpack_options;
  executorch::runtime::LoadBackendOptionsMap backend_options;
  Error options_err = xnnpack_options.set_option("weight_cache_enabled", true);
  if (options_err == Error::Ok) {
    options_err = backend_options.set_options("XnnpackBackend", xnnpack_options.view());
  }
  if (options_err != Error::Ok) {
    return options_err;
  }
  const bool huge_pages = HugePagesEnabled();
  const std::vector<AddressRange> mapped_before =
      huge_pages ? AnonymousMappings() : std::vector<AddressRange>();
  Result<executorch::runtime::Method> method =
      program_->load_method(kMethodName, memory_manager_.get(), /*event_tracer=*/nullptr,
                            data_map_.get(), &backend_options);
  if (!method.ok()) {
    LogMethodLoadFailure(method.error());
    return method.error();
  }
  if (huge_pages) {
    // What the load mapped is mostly XNNPACK's packed weights, which every step streams.
    BackNewMappingsWithHugePages(mapped_before);
  }
  method_ = std::make_unique<executorch::runtime::Method>(std::move(method.get()));
  return Error::Ok;
}

const PortableEngine::Binding* PortableEngine::Find(const std::string& name) const {
  auto it = index_by_name_.find(name);
  return it == index_by_name_.end() ? nullptr : &bindings_[it->second];
}

PortableEngine::Binding* PortableEngine::Find(const std::string& name) {
  return const_cast<Binding*>(static_cast<const PortableEngine*>(this)->Find(name));
}

int32_t PortableEngine::NumIOTensors() const { return static_cast<int32_t>(bindings_.size()); }

std::string PortableEngine::IOTensorName(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= bindings_.size()) {
    return "";
  }
  return bindings_[index].name;
}

TensorIOMode PortableEngine::IOMode(const std::string& name) const {
  const Binding* b = Find(name);
  return b == nullptr ? TensorIOMode::kNone : b->mode;
}

Result<ScalarType> PortableEngine::TensorDType(const std::string& name) const {
  const Binding* b = Find(name);
  if (b == nullptr) {
    return Error::NotFound;
  }
  return b->dtype;
}

Result<std::vector<int64_t>> PortableEngine::TensorShape(const std::string& name) const {
  const Binding* b = Find(name);
  if (b == nullptr) {
    return Error::NotFound;
  }
  return b->shape;
}

AliasReport PortableEngine::AliasedInput(const std::string& name) const {
  // A nested ExecuTorch program has no notion of aliased I/O: whether an output updates an
  // input in place depends on how the caller binds them, which the blob metadata decides.
  AliasReport report;
  report.status = IOMode(name) == TensorIOMode::kOutput ? AliasReport::Status::kUnknown
                                                        : AliasReport::Status::kNotAliased;
  return report;
}

Error PortableEngine::SetInputShape(const std::string& name, const std::vector<int64_t>& shape) {
  Binding* b = Find(name);
  if (b == nullptr || b->mode != TensorIOMode::kInput) {
    ET_LOG(Error, "executorch_trt: portable engine: SetInputShape: no input named '%s'.",
           name.c_str());
    return Error::NotFound;
  }
  // The nested method's set_input resizes its input to this shape (ExecuTorch
  // resize_tensor): only a dynamic-bound tensor may change, and only within the upper
  // bound it was planned at. Check the bound here, with the names.
  bool fits = shape.size() == b->shape.size();
  for (size_t d = 0; fits && d < shape.size(); ++d) {
    fits = shape[d] >= 0 && shape[d] <= b->shape[d];
  }
  if (!fits) {
    ET_LOG(Error,
           "executorch_trt: portable engine: input '%s' was built with shape %s (the upper "
           "bound of each dynamic dimension), got %s.",
           name.c_str(), ShapeString(b->shape).c_str(), ShapeString(shape).c_str());
    return Error::InvalidArgument;
  }
  if (shape == b->shape && b->runtime_nbytes == b->nbytes) {
    return Error::Ok;  // the static case: nothing changes
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    b->runtime_sizes[d] = static_cast<int32_t>(shape[d]);
  }
  b->runtime_nbytes = NumBytes(b->dtype, shape);
  ContiguousStrides(b->runtime_sizes, &b->strides);
  return Error::Ok;
}

Error PortableEngine::SetTensorAddress(const std::string& name, void* data, size_t nbytes) {
  Binding* b = Find(name);
  if (b == nullptr) {
    ET_LOG(Error, "executorch_trt: portable engine: SetTensorAddress: no tensor named '%s'.",
           name.c_str());
    return Error::NotFound;
  }
  const size_t needed = b->mode == TensorIOMode::kInput ? b->runtime_nbytes : b->nbytes;
  if (nbytes < needed || (data == nullptr && needed > 0)) {
    ET_LOG(Error,
           "executorch_trt: portable engine: tensor '%s' needs %zu bytes, got %zu bytes "
           "at %p.",
           name.c_str(), needed, nbytes, data);
    return Error::InvalidArgument;
  }
  b->address = data;
  b->bound_nbytes = nbytes;
  b->bound = true;
  return Error::Ok;
}

Error PortableEngine::Execute() {
  if (method_ == nullptr) {
    return Error::InvalidState;
  }
  for (const Binding& b : bindings_) {
    if (!b.bound) {
      ET_LOG(Error,
             "executorch_trt: portable engine: %s '%s' has no address; bind every tensor "
             "before Execute().",
             TensorIOModeName(b.mode), b.name.c_str());
      return Error::InvalidState;
    }
  }
  Error err = Error::Ok;
  for (Binding& b : bindings_) {
    if (b.mode == TensorIOMode::kInput) {
      // The nested input is not memory-planned, so set_input points the method's input
      // tensor at `address` (no copy) after checking dtype and shape.
      executorch::runtime::etensor::TensorImpl impl(
          b.dtype, static_cast<ssize_t>(b.runtime_sizes.size()), b.runtime_sizes.data(), b.address,
          b.dim_order.data(), b.strides.data());
      err = method_->set_input(EValue(executorch::aten::Tensor(&impl)), b.method_index);
    } else {
      // set_output_data_ptr checks the storage against the output's current size, which a
      // dynamic output keeps from the last call; the bound storage holds the upper bound
      // (SetTensorAddress), so size the output back to it. The kernels resize it to the
      // call's actual sizes as they write (OutputShape reads them).
      const executorch::aten::Tensor out = method_->get_output(b.method_index).toTensor();
      if (out.nbytes() != b.nbytes) {
        err = executorch::runtime::resize_tensor(out,
                                                 {b.runtime_sizes.data(), b.runtime_sizes.size()});
      }
      if (err == Error::Ok) {
        err = method_->set_output_data_ptr(b.address, b.bound_nbytes, b.method_index);
      }
    }
    if (err != Error::Ok) {
      ET_LOG(Error,
             "executorch_trt: portable engine: binding %s '%s' to the nested method "
             "failed (error 0x%" PRIx32 ").",
             TensorIOModeName(b.mode), b.name.c_str(), static_cast<uint32_t>(err));
      break;
    }
  }
  if (err == Error::Ok) {
    err = method_->execute();
    if (err != Error::Ok) {
      ET_LOG(Error,
             "executorch_trt: portable engine: the nested method failed (error 0x%" PRIx32 ").",
             static_cast<uint32_t>(err));
    }
  }
  for (Binding& b : bindings_) {
    b.bound = false;
    b.address = nullptr;
    b.bound_nbytes = 0;
  }
  return err;
}

Result<std::vector<int64_t>> PortableEngine::OutputShape(const std::string& name) const {
  const Binding* b = Find(name);
  if (b == nullptr || b->mode != TensorIOMode::kOutput || method_ == nullptr) {
    return Error::NotFound;
  }
  const executorch::aten::Tensor out = method_->get_output(b->method_index).toTensor();
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  return shape;
}

}  // namespace executorch_trt
