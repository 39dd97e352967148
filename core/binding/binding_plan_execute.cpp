// Copyright (c) executorch-trt authors.
//
// BindingPlan::Execute: the per-call half of binding_plan.h.

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "core/binding/binding_plan.h"
#include "core/binding/copy_counter.h"
#include "core/blob/dtype_name.h"
#include "core/common/runtime_types.h"
#include "core/common/shape_string.h"

namespace executorch_trt {
namespace {

Error NotATensor(const EValue* arg, size_t index, const PlannedBinding& b) {
  if (arg != nullptr && arg->isTensor()) {
    return Error::Ok;
  }
  ET_LOG(Error,
         "executorch_trt: delegate argument %zu (%s '%s') is not a tensor; the program "
         "and its delegate blob disagree, re-export.",
         index, TensorIOModeName(b.mode), b.name.c_str());
  return Error::InvalidArgument;
}

// `b`'s exported shape as messages print it: a dynamic dimension as its size's name and range
// ("[1, T=1..16, 8]"), not as the upper bound the binding is planned for.
std::string ExpectedShape(const PlannedBinding& b, const std::vector<SymbolRange>& symbols) {
  std::string out = "[";
  for (size_t d = 0; d < b.shape.size(); ++d) {
    out += d == 0 ? "" : ", ";
    const int32_t k = d < b.dim_symbol.size() ? b.dim_symbol[d] : -1;
    if (k >= 0 && static_cast<size_t>(k) < symbols.size()) {
      const SymbolRange& symbol = symbols[k];
      out += symbol.name + "=" + std::to_string(symbol.min) + ".." + std::to_string(symbol.max);
    } else {
      out += std::to_string(b.shape[d]);
    }
  }
  return out + "]";
}

Error WrongArgument(const Tensor& t, size_t index, const PlannedBinding& b,
                    const std::vector<SymbolRange>& symbols) {
  const bool dynamic =
      std::any_of(b.dim_symbol.begin(), b.dim_symbol.end(), [](int32_t k) { return k >= 0; });
  ET_LOG(Error,
         "executorch_trt: delegate argument %zu (%s '%s') is %s %s (%zu bytes), the "
         "engine expects %s %s (%s%zu bytes); pass tensors of the exported shape and dtype.",
         index, TensorIOModeName(b.mode), b.name.c_str(), DTypeName(t.scalar_type()).c_str(),
         ShapeString(t.sizes()).c_str(), t.nbytes(), DTypeName(b.dtype).c_str(),
         ExpectedShape(b, symbols).c_str(), dynamic ? "at most " : "", b.nbytes);
  return Error::InvalidArgument;
}

// Checks that tensor argument `t` has `b`'s dtype and rank, and the static sizes of `b`.
// With `values` (inputs), each dynamic dimension must lie in its symbol's range and equal
// the value an earlier dimension gave the symbol (recorded in `values`, -1 = none yet);
// without it (outputs), dynamic dimensions are not checked (they are resized).
Error CheckArg(const Tensor& t, size_t index, const PlannedBinding& b,
               const std::vector<SymbolRange>& symbols, std::vector<int64_t>* values) {
  if (t.scalar_type() != b.dtype || static_cast<size_t>(t.dim()) != b.shape.size()) {
    return WrongArgument(t, index, b, symbols);
  }
  for (size_t d = 0; d < b.shape.size(); ++d) {
    const int64_t size = t.size(d);
    const int32_t k = b.dim_symbol[d];
    if (k < 0) {
      if (size != b.shape[d]) {
        return WrongArgument(t, index, b, symbols);
      }
      continue;
    }
    if (values == nullptr) {
      continue;
    }
    const SymbolRange& symbol = symbols[k];
    if (size < symbol.min || size > symbol.max) {
      ET_LOG(Error,
             "executorch_trt: delegate argument %zu (input '%s') dimension %zu is %" PRId64
             ", outside the range [%" PRId64 ", %" PRId64
             "] of its dynamic size '%s' (the range it was exported with).",
             index, b.name.c_str(), d, size, symbol.min, symbol.max, symbol.name.c_str());
      return Error::InvalidArgument;
    }
    int64_t& value = (*values)[k];
    if (value >= 0 && value != size) {
      ET_LOG(Error,
             "executorch_trt: delegate argument %zu (input '%s') dimension %zu is %" PRId64
             " but an earlier input gave dynamic size '%s' the value %" PRId64
             "; every dimension exported as '%s' must have one size per call.",
             index, b.name.c_str(), d, size, symbol.name.c_str(), value, symbol.name.c_str());
      return Error::InvalidArgument;
    }
    value = size;
  }
  // With dtype, rank and static sizes checked, t.nbytes() is the binding's size (a dynamic
  // output's sizes are stale until it is resized; the engine checks its storage against the
  // upper bound).
  if (t.nbytes() > 0 && t.const_data_ptr() == nullptr) {
    ET_LOG(Error,
           "executorch_trt: delegate argument %zu (%s '%s') has no storage (null data); "
           "bind memory to it before execute.",
           index, TensorIOModeName(b.mode), b.name.c_str());
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

// The sizes of dynamic binding `b` for symbol `values`, as ExecuTorch's SizesType.
void SizesFor(const PlannedBinding& b, const std::vector<int64_t>& values,
              std::vector<executorch::aten::SizesType>* sizes) {
  sizes->resize(b.shape.size());
  for (size_t d = 0; d < b.shape.size(); ++d) {
    (*sizes)[d] = static_cast<executorch::aten::SizesType>(
        b.dim_symbol[d] < 0 ? b.shape[d] : values[b.dim_symbol[d]]);
  }
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
    Error err = NotATensor(args[i], i, bindings_[i]);
    if (err != Error::Ok) {
      return err;
    }
  }
  // Inputs first: they give each dynamic size its value for this call.
  std::vector<int64_t> values(symbols_.size(), -1);
  for (size_t i = 0; i < bindings_.size(); ++i) {
    Error err = CheckArg(args[i]->toTensor(), i, bindings_[i], symbols_,
                         i < num_inputs_ ? &values : nullptr);
    if (err != Error::Ok) {
      return err;
    }
  }

  std::vector<int64_t> input_shape;
  std::vector<executorch::aten::SizesType> sizes;
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const PlannedBinding& b = bindings_[i];
    Tensor t = args[i]->toTensor();
    Error err = Error::Ok;
    if (b.mode == TensorIOMode::kInput) {
      if (b.is_static) {
        err = engine.SetInputShape(b.name, b.shape);
      } else {
        input_shape.assign(t.sizes().begin(), t.sizes().end());
        err = engine.SetInputShape(b.name, input_shape);
      }
      if (err == Error::Ok) {
        err = engine.SetTensorAddress(b.name, t.mutable_data_ptr(), t.nbytes());
      }
    } else {
      if (!b.is_static) {
        // ExecuTorch leaves a delegate's outputs at whatever size they had; give this
        // call's sizes. The storage holds the upper bound (planned at it).
        SizesFor(b, values, &sizes);
        err = executorch::runtime::resize_tensor(t, {sizes.data(), sizes.size()});
        if (err != Error::Ok) {
          ET_LOG(Error,
                 "executorch_trt: delegate output '%s' (argument %zu) cannot be resized to "
                 "this call's sizes (error 0x%" PRIx32
                 "); ExecuTorch planned it as a static tensor, re-export.",
                 b.name.c_str(), i, static_cast<uint32_t>(err));
          return Error::InvalidArgument;
        }
      }
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

  for (size_t i = num_inputs_; i < bindings_.size(); ++i) {
    const PlannedBinding& b = bindings_[i];
    if (!b.is_static) {
      // The engine must have written exactly the sizes the output was given; anything
      // else would leave the caller reading stale or partial values as if they were new.
      Result<std::vector<int64_t>> written = engine.OutputShape(b.name);
      const Tensor t = args[i]->toTensor();
      bool same = written.ok() && written->size() == static_cast<size_t>(t.dim());
      for (size_t d = 0; same && d < written->size(); ++d) {
        same = (*written)[d] == t.size(d);
      }
      if (!same) {
        ET_LOG(Error,
               "executorch_trt: the engine wrote output '%s' with shape %s, but this call's "
               "dynamic sizes make it %s; the engine and its blob disagree, re-export.",
               b.name.c_str(), written.ok() ? ShapeString(written.get()).c_str() : "(unknown)",
               ShapeString(t.sizes()).c_str());
        return Error::InvalidState;
      }
    }
    if (!b.aliased) {
      continue;
    }
    // Reflect in-place updates into separate output tensors (copy-back mode).
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
