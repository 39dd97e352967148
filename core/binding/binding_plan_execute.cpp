// Copyright (c) executorch-trt authors.
//
// BindingPlan::Execute: the per-call half of binding_plan.h.

#include <cinttypes>
#include <cstring>

#include <executorch/runtime/platform/log.h>

#include "core/binding/binding_plan.h"
#include "core/binding/copy_counter.h"
#include "core/blob/dtype_name.h"
#include "core/common/runtime_types.h"
#include "core/common/shape_string.h"

namespace executorch_trt {
namespace {

std::string SizesString(const Tensor& t) {
  std::string s = "[";
  for (ssize_t i = 0; i < t.dim(); ++i) {
    s += (i ? ", " : "") + std::to_string(t.size(i));
  }
  return s + "]";
}

// Checks that `arg` is a tensor matching `b`; logs and returns InvalidArgument if not.
Error CheckArg(const EValue* arg, size_t index, const PlannedBinding& b) {
  if (arg == nullptr || !arg->isTensor()) {
    ET_LOG(Error,
           "executorch_trt: delegate argument %zu (%s '%s') is not a tensor; the program "
           "and its delegate blob disagree, re-export.",
           index, TensorIOModeName(b.mode), b.name.c_str());
    return Error::InvalidArgument;
  }
  const Tensor& t = arg->toTensor();
  bool same_shape = static_cast<size_t>(t.dim()) == b.shape.size();
  for (size_t d = 0; same_shape && d < b.shape.size(); ++d) {
    same_shape = t.size(d) == b.shape[d];
  }
  if (t.scalar_type() != b.dtype || !same_shape || t.nbytes() != b.nbytes) {
    ET_LOG(Error,
           "executorch_trt: delegate argument %zu (%s '%s') is %s %s (%zu bytes), the "
           "engine expects %s %s (%zu bytes); pass tensors of the exported shape and dtype.",
           index, TensorIOModeName(b.mode), b.name.c_str(), DTypeName(t.scalar_type()).c_str(),
           SizesString(t).c_str(), t.nbytes(), DTypeName(b.dtype).c_str(),
           ShapeString(b.shape).c_str(), b.nbytes);
    return Error::InvalidArgument;
  }
  if (b.nbytes > 0 && t.const_data_ptr() == nullptr) {
    ET_LOG(Error,
           "executorch_trt: delegate argument %zu (%s '%s') has no storage (null data); "
           "bind memory to it before execute.",
           index, TensorIOModeName(b.mode), b.name.c_str());
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

}  // namespace

Error BindingPlan::Execute(Engine& engine, Span<EValue*> args) const {
  if (args.size() != bindings_.size()) {
    ET_LOG(Error,
           "executorch_trt: the delegate was called with %zu arguments, its blob declares "
           "%zu inputs + %zu outputs = %zu; the program and its delegate blob disagree, "
           "re-export.",
           args.size(), num_inputs(), num_outputs(), bindings_.size());
    return Error::InvalidArgument;
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    Error err = CheckArg(args[i], i, bindings_[i]);
    if (err != Error::Ok) {
      return err;
    }
  }

  for (size_t i = 0; i < bindings_.size(); ++i) {
    const PlannedBinding& b = bindings_[i];
    Error err = Error::Ok;
    if (b.mode == TensorIOMode::kInput) {
      err = engine.SetInputShape(b.name, b.shape);
      if (err == Error::Ok) {
        err = engine.SetTensorAddress(b.name, args[i]->toTensor().mutable_data_ptr(), b.nbytes);
      }
    } else {
      // An aliased output writes into its input's storage: the caller's state.
      const size_t source = b.aliased ? b.alias_input_arg : i;
      err = engine.SetTensorAddress(b.name, args[source]->toTensor().mutable_data_ptr(), b.nbytes);
    }
    if (err != Error::Ok) {
      ET_LOG(Error, "executorch_trt: binding %s '%s' (delegate argument %zu) failed.",
             TensorIOModeName(b.mode), b.name.c_str(), i);
      return err;
    }
  }

  Error err = engine.Execute();
  if (err != Error::Ok) {
    return err;
  }

  // Reflect in-place updates into separate output tensors (copy-back mode).
  for (size_t i = num_inputs_; i < bindings_.size(); ++i) {
    const PlannedBinding& b = bindings_[i];
    if (!b.aliased) {
      continue;
    }
    void* dst = args[i]->toTensor().mutable_data_ptr();
    const void* src = args[b.alias_input_arg]->toTensor().const_data_ptr();
    if (dst != src && b.nbytes > 0) {
      std::memmove(dst, src, b.nbytes);
      AddBytesCopied(b.nbytes);
    }
  }
  return Error::Ok;
}

}  // namespace executorch_trt
