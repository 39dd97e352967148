// Copyright (c) executorch-trt authors.

#include "py/binding/program_session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <executorch/extension/tensor/tensor_ptr_maker.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/tensor_shape_dynamism.h>
#include <executorch/runtime/executor/method_meta.h>

#include "core/common/error_text.h"
#include "core/common/shape_string.h"
#include "py/binding/stderr_log.h"

namespace executorch_trt::python {
namespace {

using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;

// What `capture` holds, to end a message: "; ExecuTorch logged:\n  <line>\n  <line>" (the
// error lines ExecuTorch and the delegate logged while the call ran), else `if_none`.
std::string Logged(const LogCapture& capture, const std::string& if_none = "") {
  const std::string lines = capture.Lines();
  return lines.empty() ? if_none : "; ExecuTorch logged:\n" + lines;
}

std::string InputString(const InputValue& v) {
  switch (v.kind) {
    case InputValue::Kind::kTensor:
      return "tensor " + SpecString(v.dtype, v.sizes);
    case InputValue::Kind::kInt:
      return "int " + std::to_string(v.int_value);
    case InputValue::Kind::kDouble:
      return "float " + std::to_string(v.double_value);
    case InputValue::Kind::kBool:
      return v.bool_value ? "bool True" : "bool False";
    case InputValue::Kind::kNone:
      return "None";
  }
  return "?";
}

// What the method declares for input `i`, for messages. For a dynamic tensor input
// (`dynamic`): its upper bound, said to be one, and which dimensions of `given` exceed it.
std::string DeclaredInput(const MethodMeta& meta, size_t i, bool dynamic, const InputValue& given) {
  Result<Tag> tag = meta.input_tag(i);
  if (!tag.ok()) {
    return "?";
  }
  if (tag.get() != Tag::Tensor) {
    return std::string("a ") + executorch::runtime::tag_to_string(tag.get());
  }
  Result<executorch::runtime::TensorInfo> info = meta.input_tensor_meta(i);
  if (!info.ok()) {
    return "a tensor";
  }
  if (!dynamic) {
    return "tensor " + SpecString(info->scalar_type(), info->sizes());
  }
  const auto bound = info->sizes();
  std::string s = "tensor " + std::string(executorch::runtime::toString(info->scalar_type())) +
                  " with shape at most " + ShapeString(bound) + ", a dynamic shape";
  if (given.kind != InputValue::Kind::kTensor) {
    return s;
  }
  if (given.sizes.size() != bound.size()) {
    return s + " of rank " + std::to_string(bound.size());
  }
  const char* joint = " whose ";
  for (size_t d = 0; d < bound.size(); ++d) {
    if (given.sizes[d] > bound[d]) {
      s += joint + std::string("dimension ") + std::to_string(d) + " is " +
           std::to_string(given.sizes[d]) + " > " + std::to_string(bound[d]);
      joint = " and ";
    }
  }
  return s;
}

}  // namespace

ProgramSession::ProgramSession(std::unique_ptr<LoadedProgram> program)
    : program_(std::move(program)) {}

void* ProgramSession::buffer_data(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  return program_->buffer_data(name);
}

Error ProgramSession::BindBuffers(const std::vector<Binding>& bindings, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  return program_->BindBuffers(bindings, error);
}

Error ProgramSession::Signature(std::string_view method, MethodSignature* signature,
                                std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  executorch::runtime::Method* m = program_->method(method);
  if (m == nullptr) {
    *error = "no method '" + std::string(method) + "'";
    return Error::NotFound;
  }
  const MethodMeta meta = m->method_meta();
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    Result<executorch::runtime::TensorInfo> info = meta.input_tensor_meta(i);
    signature->input_is_tensor.push_back(info.ok());
    signature->inputs.push_back(
        info.ok() ? TensorSpec{info->scalar_type(), {info->sizes().begin(), info->sizes().end()}}
                  : TensorSpec{});
  }
  for (size_t i = 0; i < meta.num_outputs(); ++i) {
    Result<executorch::runtime::TensorInfo> info = meta.output_tensor_meta(i);
    signature->output_is_tensor.push_back(info.ok());
    signature->outputs.push_back(
        info.ok() ? TensorSpec{info->scalar_type(), {info->sizes().begin(), info->sizes().end()}}
                  : TensorSpec{});
  }
  return Error::Ok;
}

Error ProgramSession::Execute(std::string_view method, const std::vector<InputValue>& inputs,
                              std::vector<OutputValue>* outputs, std::string* error) {
  UseStderrLog();  // another library may have replaced the log function since the last call
  std::lock_guard<std::mutex> lock(mu_);
  // The reasons set_input and execute log (a delegate's size check, a kernel's index check)
  // go into *error as well as to stderr.
  LogCapture capture;
  executorch::runtime::Method* m = program_->method(method);
  const std::string name(method);
  if (m == nullptr) {
    *error = "no method '" + name + "'";
    return Error::NotFound;
  }
  if (inputs.size() != m->inputs_size()) {
    *error = "method '" + name + "' takes " + std::to_string(m->inputs_size()) + " inputs, got " +
             std::to_string(inputs.size());
    return Error::InvalidArgument;
  }
  // Tensors over the caller's memory: they must live until execute() returns (an input that
  // is not memory-planned keeps the pointer instead of copying).
  std::vector<executorch::extension::TensorPtr> tensors;
  tensors.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputValue& in = inputs[i];
    EValue value;
    switch (in.kind) {
      case InputValue::Kind::kTensor:
        tensors.push_back(executorch::extension::from_blob(in.data, in.sizes, in.dtype));
        value = EValue(*tensors.back());
        break;
      case InputValue::Kind::kInt:
        value = EValue(in.int_value);
        break;
      case InputValue::Kind::kDouble:
        value = EValue(in.double_value);
        break;
      case InputValue::Kind::kBool:
        value = EValue(in.bool_value);
        break;
      case InputValue::Kind::kNone:
        break;
    }
    const Error err = m->set_input(value, i);
    if (err != Error::Ok) {
      *error = "method '" + name + "': input " + std::to_string(i) + " is " + InputString(in) +
               ", expected " +
               DeclaredInput(m->method_meta(), i, extension::InputIsDynamic(*m, i), in) +
               " (set_input error " + ErrorText(err) + ")" + Logged(capture);
      return Error::InvalidArgument;
    }
  }
  // A buffer without storage (exported with alloc_mutable_buffers=False and never bound) would
  // be read and written through a null pointer: refuse to run rather than let a kernel find it.
  const auto& names = program_->method_names();
  const size_t index =
      static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  for (const NamedBuffer& buffer : program_->buffers()) {
    if (buffer.nbytes == 0 ||
        std::find(buffer.methods.begin(), buffer.methods.end(), index) == buffer.methods.end()) {
      continue;
    }
    Result<Tensor> t = program_->buffer_tensor(index, buffer.name);
    if (t.ok() && t->const_data_ptr() == nullptr) {
      *error = "method '" + name + "': buffer '" + buffer.name +
               "' has no storage: the program was exported with alloc_mutable_buffers=False, "
               "so you provide it: bind it first (bind_buffer / bind_state)";
      return Error::InvalidState;
    }
  }
  const Error err = m->execute();
  if (err != Error::Ok) {
    // No lines: another library's log function took over, or the reason was logged on
    // another thread.
    *error = "method '" + name + "': execute failed (error " + ErrorText(err) + ")" +
             Logged(capture, "; ExecuTorch logged no reason on this thread (see stderr)");
    return Error::Internal;  // the run failed, whatever ExecuTorch's code (*error has it)
  }
  outputs->clear();
  outputs->resize(m->outputs_size());
  for (size_t i = 0; i < m->outputs_size(); ++i) {
    const EValue& v = m->get_output(i);
    OutputValue& out = (*outputs)[i];
    if (v.isTensor()) {
      const Tensor t = v.toTensor();
      out.kind = OutputValue::Kind::kTensor;
      out.dtype = t.scalar_type();
      out.sizes.assign(t.sizes().begin(), t.sizes().end());
      const auto* data = static_cast<const uint8_t*>(t.const_data_ptr());
      if (data == nullptr && t.nbytes() != 0) {
        *error = "method '" + name + "': output " + std::to_string(i) + " has no data";
        return Error::InvalidState;
      }
      out.bytes.assign(data, data + t.nbytes());
    } else if (v.isInt()) {
      out.kind = OutputValue::Kind::kInt;
      out.int_value = v.toInt();
    } else if (v.isDouble()) {
      out.kind = OutputValue::Kind::kDouble;
      out.double_value = v.toDouble();
    } else if (v.isBool()) {
      out.kind = OutputValue::Kind::kBool;
      out.bool_value = v.toBool();
    } else if (v.isNone()) {
      out.kind = OutputValue::Kind::kNone;
    } else {
      *error = "method '" + name + "': output " + std::to_string(i) + " is a " +
               executorch::runtime::tag_to_string(v.tag) +
               ", which executorch_trt.runtime cannot return (tensors and scalars only)";
      return Error::NotSupported;
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt::python
