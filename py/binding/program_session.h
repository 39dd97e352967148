// Copyright (c) executorch-trt authors.
//
// program_session.h: a LoadedProgram (extension/program/loaded_program.h) as
// executorch_trt.runtime uses it: inputs and outputs as plain values, every call serialized by
// the program's own lock. No Python in here: the binding (module.cpp) converts and releases
// the GIL around these calls.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::python {

using extension::BufferBinding;
using extension::LoadedProgram;
using extension::NamedBuffer;

// What an input or output of a method holds apart from a tensor's storage and shape: its
// kind, a tensor's dtype, or a scalar's value (the member its kind names).
struct MethodValue {
  enum class Kind { kTensor, kInt, kDouble, kBool, kNone };
  Kind kind = Kind::kNone;
  ScalarType dtype = ScalarType::Float;  // kTensor
  int64_t int_value = 0;
  double double_value = 0;
  bool bool_value = false;
};

// One input of a method: a tensor over the caller's memory (contiguous, not copied here) or
// a scalar.
struct InputValue : MethodValue {
  void* data = nullptr;  // kTensor: the caller's memory, valid for the whole Execute
  std::vector<int32_t> sizes;
};

// One output of a method: a tensor's bytes (a copy: the method's output memory is reused by
// its next execute) or a scalar.
struct OutputValue : MethodValue {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> sizes;
};

// A tensor's dtype and shape as metadata records it.
struct TensorSpec {
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> sizes;
};

// A method's declared inputs and outputs; a value that is not a tensor has `is_tensor` false.
struct MethodSignature {
  std::vector<bool> input_is_tensor;
  std::vector<TensorSpec> inputs;
  std::vector<bool> output_is_tensor;
  std::vector<TensorSpec> outputs;
};

// Thread-safety: every member takes the session's lock, so one session may be called from
// several threads (the calls run one at a time). Memory returned by buffer_data() is read and
// written by the caller without the lock. A Python caller must release the GIL before calling
// any member that takes the lock (an execute holding it may log, and a log function another
// library registered may take the GIL).
class ProgramSession {
 public:
  explicit ProgramSession(std::unique_ptr<LoadedProgram> program);

  const std::vector<std::string>& method_names() const { return program_->method_names(); }
  const std::vector<NamedBuffer>& buffers() const { return program_->buffers(); }
  std::string BufferNameList() const { return program_->BufferNameList(); }
  const std::vector<uint8_t>& initial_value(std::string_view name) const {
    return program_->initial_value(name);
  }

  // The storage buffer `name` uses now (see LoadedProgram::buffer_data).
  void* buffer_data(std::string_view name);

  // One buffer's new storage (the caller's memory).
  using Binding = BufferBinding;

  // LoadedProgram::BindBuffers under one hold of the lock, so no execute sees some of
  // `bindings` bound and others not; on a check's error nothing is bound.
  Error BindBuffers(const std::vector<Binding>& bindings, std::string* error);

  // The declared inputs and outputs of `method`; Error::NotFound for a method not loaded.
  Error Signature(std::string_view method, MethodSignature* signature, std::string* error);

  // Sets `inputs` (in the method's input order) and runs `method`; fills *outputs. Errors
  // (*error names the method and, for an input, its index and both specs): Error::NotFound (no
  // such method), Error::InvalidArgument (wrong number of inputs, an input ExecuTorch rejects:
  // Method::set_input; for a dynamic input *error gives its shape's upper bound as one and the
  // dimensions above it), Error::InvalidState for a buffer of the method with no storage
  // (alloc_mutable_buffers=False, never bound: nothing runs), Error::Internal when
  // Method::execute fails (*error has its code and name),
  // Error::NotSupported for an output that is neither a tensor nor a scalar. When set_input or
  // execute fails, *error ends with the error lines ExecuTorch and the delegates logged on this
  // thread meanwhile (LogCapture, at most LogCapture::kMaxBytes; they go to stderr too).
  Error Execute(std::string_view method, const std::vector<InputValue>& inputs,
                std::vector<OutputValue>* outputs, std::string* error);

 private:
  std::mutex mu_;
  std::unique_ptr<LoadedProgram> program_;
};

}  // namespace executorch_trt::python
