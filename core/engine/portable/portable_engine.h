// Copyright (c) executorch-trt authors.
//
// portable_engine.h: the reference engine. Runs the partition as a nested ExecuTorch
// program on the CPU, through the ExecuTorch runtime itself, behind the same Engine
// interface a TensorRT plan uses. Every binding, aliasing and ordering rule of the
// delegate is therefore exercised end to end without a GPU.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>

#include "core/engine/engine.h"

namespace executorch_trt {

struct ConstantLayoutSpec;
struct PortablePayload;

// An Engine over a portable payload (docs/formats/portable_payload.md).
//
// Binding names come from the payload descriptor; dtypes and shapes from the
// nested method's MethodMeta. The nested program must be exported with
// alloc_graph_input=False and alloc_graph_output=False: inputs are then bound with
// Method::set_input, which shares the caller's pointer for an unplanned input (no copy),
// and outputs with Method::set_output_data_ptr. An output bound to the same address as
// its aliased input is updated in place by the nested program's kernels (e.g.
// executorch_trt::kv_cache_update.out).
//
// Thread-safety: see Engine. Not copyable or movable (the nested Method holds pointers
// into this object).
class PortableEngine final : public Engine {
 public:
  // Creates an engine over `size` bytes of portable payload at `payload`. `named_data` (may
  // be null) is the outer program's named data, given to the nested method's load (through a
  // ConstantLayoutsDataMap): the nested method's external constants and its XNNPACK
  // delegates' weights are there (the builder moves them out of the nested program so a
  // program stores each weight once; docs/formats/portable_payload.md). It is borrowed and must
  // outlive the engine.
  //
  // Ownership: the payload is borrowed and must outlive the engine (the backend keeps
  // the delegate blob alive in its handle); if the nested program is not 16-byte
  // aligned in memory it is copied into an owned aligned buffer instead.
  //
  // Errors (each logged): the payload's own errors (PortablePayload::Parse); nested
  // program that does not load (its Program::load error); no method "forward"; a
  // method whose input/output count differs from the descriptor's; a non-tensor
  // input/output; a memory-planned input/output (Error::InvalidProgram: re-export with
  // alloc_graph_input=False, alloc_graph_output=False); a non-contiguous dim order;
  // Method load failure (e.g. a missing kernel: Error::OperatorMissing).
  static executorch::runtime::Result<std::unique_ptr<PortableEngine>> Create(
      const uint8_t* payload, size_t size,
      const executorch::runtime::NamedDataMap* named_data = nullptr);

  ~PortableEngine() override;
  PortableEngine(const PortableEngine&) = delete;
  PortableEngine& operator=(const PortableEngine&) = delete;

  int32_t NumIOTensors() const override;
  std::string IOTensorName(int32_t index) const override;
  TensorIOMode IOMode(const std::string& name) const override;
  executorch::runtime::Result<executorch::aten::ScalarType> TensorDType(
      const std::string& name) const override;
  executorch::runtime::Result<std::vector<int64_t>> TensorShape(
      const std::string& name) const override;
  // kUnknown for every output (the blob metadata's `aliased_io` decides, as for a
  // TensorRT engine older than 10.15), kNotAliased for any other name.
  AliasReport AliasedInput(const std::string& name) const override;
  executorch::runtime::Error SetInputShape(const std::string& name,
                                           const std::vector<int64_t>& shape) override;
  executorch::runtime::Error SetTensorAddress(const std::string& name, void* data,
                                              size_t nbytes) override;
  // Sets every input with Method::set_input (sharing the bound pointer), every output
  // with Method::set_output_data_ptr, then runs Method::execute. All tensors must have
  // been bound since the previous Execute(); bindings are cleared afterwards.
  executorch::runtime::Error Execute() override;
  // The nested method's output tensor sizes after the last Execute().
  executorch::runtime::Result<std::vector<int64_t>> OutputShape(
      const std::string& name) const override;

 private:
  struct Binding {
    std::string name;
    TensorIOMode mode = TensorIOMode::kNone;
    size_t method_index = 0;  // index among the method's inputs or outputs
    executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float;
    std::vector<int64_t> shape;          // shape from MethodMeta (upper bound if dynamic)
    std::vector<int32_t> runtime_sizes;  // shape for the next Execute() (inputs)
    std::vector<int32_t> strides;        // contiguous strides of runtime_sizes
    std::vector<uint8_t> dim_order;      // identity
    size_t nbytes = 0;                   // bytes of `shape`
    size_t runtime_nbytes = 0;           // bytes of runtime_sizes (inputs)
    void* address = nullptr;
    size_t bound_nbytes = 0;
    bool bound = false;
  };

  PortableEngine() = default;
  // Create()'s work, in phases (each logs its own errors): parse the payload, LoadProgram,
  // DescribeBindings, AllocatePlannedMemory, PrepareNamedData, LoadMethod.
  executorch::runtime::Error Load(const uint8_t* payload, size_t size,
                                  const executorch::runtime::NamedDataMap* named_data);
  // program_ over the payload's nested program (over owned_program_ when it is not 16-byte
  // aligned), verified and checked (nested_program_checks.h).
  executorch::runtime::Error LoadProgram(const PortablePayload& payload);
  // bindings_ from the method's metadata, named by the payload's descriptor.
  executorch::runtime::Error DescribeBindings(const executorch::runtime::MethodMeta& meta,
                                              const PortablePayload& payload);
  // The dtype, shape and sizes of binding `b` (name, mode and method_index set) from `meta`.
  static executorch::runtime::Error DescribeTensor(const executorch::runtime::MethodMeta& meta,
                                                   Binding* b);
  // The method's planned buffers and memory_manager_.
  executorch::runtime::Error AllocatePlannedMemory(const executorch::runtime::MethodMeta& meta);
  // data_map_ (the outer program's named data and `constants`' layouts), and the nested
  // XNNPACK delegates checked against it (nested_delegate_checks.h).
  executorch::runtime::Error PrepareNamedData(const executorch::runtime::NamedDataMap* named_data,
                                              std::vector<ConstantLayoutSpec> constants);
  // method_, with XNNPACK's weight cache on.
  executorch::runtime::Error LoadMethod();
  const Binding* Find(const std::string& name) const;
  Binding* Find(const std::string& name);

  // Declaration order is destruction order in reverse: the Method goes first, then
  // the memory it was loaded into, then the Program and its data.
  std::vector<uint8_t> owned_program_;
  const uint8_t* program_data_ = nullptr;  // the nested program: the payload's or owned_program_
  size_t program_size_ = 0;
  std::unique_ptr<executorch::extension::BufferDataLoader> loader_;
  std::unique_ptr<executorch::runtime::Program> program_;
  executorch::extension::MallocMemoryAllocator method_allocator_;
  executorch::extension::MallocMemoryAllocator temp_allocator_;
  std::vector<std::unique_ptr<uint8_t[]>> planned_buffers_;
  std::vector<executorch::runtime::Span<uint8_t>> planned_spans_;
  std::unique_ptr<executorch::runtime::HierarchicalAllocator> planned_memory_;
  std::unique_ptr<executorch::runtime::MemoryManager> memory_manager_;
  // The nested method's NamedDataMap (its external constants' buffers are freed with the
  // Method, which therefore goes first).
  std::unique_ptr<executorch::runtime::NamedDataMap> data_map_;
  std::unique_ptr<executorch::runtime::Method> method_;

  std::vector<Binding> bindings_;  // engine order: inputs, then outputs
  std::unordered_map<std::string, size_t> index_by_name_;
};

}  // namespace executorch_trt
