// Copyright (c) executorch-trt authors.
//
// engine.h: the interface every execution engine of the delegate implements.
//
// It is shaped after TensorRT's nvinfer1::ICudaEngine (static description of the I/O
// tensors) and nvinfer1::IExecutionContext (per-call shapes, addresses, enqueue), so a
// TensorRT engine is a thin adapter and the engine-agnostic code above it (BindingPlan,
// TensorRTBackend) never changes when the engine does:
//
//   Engine                         TensorRT
//   NumIOTensors()                 ICudaEngine::getNbIOTensors()
//   IOTensorName(i)                ICudaEngine::getIOTensorName(i)
//   TensorIOMode(name)             ICudaEngine::getTensorIOMode(name)
//   TensorDType(name)              ICudaEngine::getTensorDataType(name)
//   TensorShape(name)              ICudaEngine::getTensorShape(name)
//   AliasedInput(name)             ICudaEngine::getAliasedInputTensor(name) (>= 10.15)
//   SetInputShape(name, shape)     IExecutionContext::setInputShape(name, dims)
//   SetTensorAddress(name, p, n)   IExecutionContext::setTensorAddress(name, p)
//   Execute()                      IExecutionContext::enqueueV3(stream) + completion
//   OutputShape(name)              IExecutionContext::getTensorShape(name) after Execute()
//
// Tensors are identified by binding name; every name is unique across inputs and
// outputs.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// Direction of an engine I/O tensor (TensorRT: nvinfer1::TensorIOMode).
enum class TensorIOMode {
  kNone,  // not a binding of this engine
  kInput,
  kOutput,
};

const char* TensorIOModeName(TensorIOMode mode);

// What an engine knows about whether an output updates an input in place.
struct AliasReport {
  enum class Status {
    kNotAliased,  // the engine writes this output to its own storage
    kAliased,     // the engine updates `input` in place and returns it as this output
    kUnknown,     // the engine cannot say (TensorRT < 10.15): trust the blob metadata
  };
  Status status = Status::kUnknown;
  std::string input;  // set when status == kAliased
};

// An execution engine for one delegate partition.
//
// Ownership: created by the backend at init, owned by the delegate handle, destroyed by
// TensorRTBackend::destroy. Memory bound with SetTensorAddress is borrowed for the next
// Execute() only.
//
// Thread-safety: the description methods (the const ones) are thread-safe. The
// SetInputShape / SetTensorAddress / Execute sequence mutates per-call state and must
// not run concurrently on one Engine (ExecuTorch never executes one loaded method
// concurrently).
class Engine {
 public:
  virtual ~Engine() = default;

  // Number of I/O tensors (inputs and outputs).
  virtual int32_t NumIOTensors() const = 0;

  // Name of I/O tensor `index` in engine binding order, or "" if `index` is out of
  // range [0, NumIOTensors()).
  virtual std::string IOTensorName(int32_t index) const = 0;

  // Direction of the tensor called `name`; kNone if there is no such tensor.
  virtual TensorIOMode IOMode(const std::string& name) const = 0;

  // Element type of `name`. Error::NotFound if there is no such tensor.
  virtual executorch::runtime::Result<executorch::aten::ScalarType> TensorDType(
      const std::string& name) const = 0;

  // Shape of `name` as the engine was built: a static size per dimension, and for a
  // dimension the engine takes dynamically either -1 (TensorRT's convention) or its upper
  // bound (the portable engine: ExecuTorch plans a dynamic-bound tensor at its upper
  // bound). Error::NotFound if no such tensor.
  virtual executorch::runtime::Result<std::vector<int64_t>> TensorShape(
      const std::string& name) const = 0;

  // Which input, if any, output `name` updates in place. For a name that is not an
  // output the result is {kNotAliased}.
  virtual AliasReport AliasedInput(const std::string& name) const = 0;

  // Sets the runtime shape of input `name` for the next Execute(); an input keeps the
  // last shape set. Errors: Error::NotFound (no such input), Error::InvalidArgument (a
  // shape the engine cannot take: another rank, a static dimension changed, a dynamic one
  // past its bound).
  virtual executorch::runtime::Error SetInputShape(const std::string& name,
                                                   const std::vector<int64_t>& shape) = 0;

  // Binds the storage of tensor `name` for the next Execute(): `data` points to
  // `nbytes` bytes the caller owns and keeps alive until Execute() returns. An output
  // may be bound to the same address as an input (in-place update). An input needs the
  // bytes of its current shape (SetInputShape), an output those of its built shape
  // (TensorShape: its upper bound when dynamic).
  // Errors: Error::NotFound (no such tensor), Error::InvalidArgument (null data for a
  // non-empty tensor, or `nbytes` smaller than the tensor needs).
  virtual executorch::runtime::Error SetTensorAddress(const std::string& name, void* data,
                                                      size_t nbytes) = 0;

  // Runs the engine on the bound tensors and returns when the outputs are written
  // (synchronous from the caller's point of view). Errors: Error::InvalidState (a
  // tensor was not bound), or the engine's own failure.
  virtual executorch::runtime::Error Execute() = 0;

  // Shape of output `name` as the last successful Execute() wrote it (a dynamic output's
  // actual sizes). Error::NotFound if there is no such output.
  virtual executorch::runtime::Result<std::vector<int64_t>> OutputShape(
      const std::string& name) const = 0;
};

}  // namespace executorch_trt
