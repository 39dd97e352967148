// Copyright (c) executorch-trt authors.

#include "core/binding/binding_plan.h"

#include <cinttypes>
#include <map>
#include <set>
#include <utility>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/log.h>

#include "core/blob/dtype_name.h"
#include "core/common/num_bytes.h"
#include "core/common/shape_string.h"

namespace executorch_trt {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::Error;
using executorch::runtime::Result;

Error Reject(const std::string& message) {
  ET_LOG(Error, "executorch_trt: binding plan: %s", message.c_str());
  return Error::InvalidProgram;
}

// Counts first: a count mismatch explains every later name mismatch.
Error CheckCounts(const DelegateMetadata& metadata, const Engine& engine) {
  size_t engine_inputs = 0;
  size_t engine_outputs = 0;
  for (int32_t i = 0; i < engine.NumIOTensors(); ++i) {
    const TensorIOMode mode = engine.IOMode(engine.IOTensorName(i));
    engine_inputs += mode == TensorIOMode::kInput;
    engine_outputs += mode == TensorIOMode::kOutput;
  }
  if (metadata.inputs.size() != engine_inputs || metadata.outputs.size() != engine_outputs) {
    return Reject("the blob metadata lists " + std::to_string(metadata.inputs.size()) +
                  " inputs and " + std::to_string(metadata.outputs.size()) +
                  " outputs, the engine has " + std::to_string(engine_inputs) + " inputs and " +
                  std::to_string(engine_outputs) +
                  " outputs; the blob and its engine disagree, re-export the model.");
  }
  return Error::Ok;
}

// Each call's inputs must give every symbol's value.
Error CheckSymbolsAreInputDimensions(const DelegateMetadata& metadata) {
  for (size_t k = 0; k < metadata.symbols.size(); ++k) {
    bool in_an_input = false;
    for (const TensorBinding& in : metadata.inputs) {
      for (int32_t s : in.dim_symbol) {
        in_an_input = in_an_input || s == static_cast<int32_t>(k);
      }
    }
    if (!in_an_input) {
      return Reject("symbol '" + metadata.symbols[k].name +
                    "' is not a dimension of any input, so no call can give its value; the "
                    "blob is inconsistent, re-export.");
    }
  }
  return Error::Ok;
}

// Delegate argument `i` (`meta`, an input or output as `want` says) checked against its engine
// binding: unique name, same direction, dtype and shape (a dynamic dimension: -1 or its upper
// bound in the engine), symbols the metadata declares. `what` names it in messages.
Error PlanBinding(const DelegateMetadata& metadata, const Engine& engine, const TensorBinding& meta,
                  TensorIOMode want, const std::string& what, PlannedBinding* b) {
  const TensorIOMode mode = engine.IOMode(meta.name);
  if (mode == TensorIOMode::kNone) {
    return Reject(what +
                  " is not a binding of the engine; the blob metadata and the "
                  "engine disagree, re-export the model.");
  }
  if (mode != want) {
    return Reject(what + " is an engine " + TensorIOModeName(mode) +
                  "; the blob metadata and the engine disagree, re-export the model.");
  }
  Result<ScalarType> dtype = engine.TensorDType(meta.name);
  Result<std::vector<int64_t>> shape = engine.TensorShape(meta.name);
  if (!dtype.ok() || !shape.ok()) {
    return Reject(what + ": the engine cannot describe it.");
  }
  if (dtype.get() != meta.dtype) {
    return Reject(what + " has dtype " + DTypeName(meta.dtype) + " in the blob but " +
                  DTypeName(dtype.get()) + " in the engine; re-export the model.");
  }
  // A dynamic dimension: the engine says -1 (TensorRT) or its upper bound (portable).
  bool same_shape = shape->size() == meta.shape.size();
  for (size_t d = 0; same_shape && d < meta.shape.size(); ++d) {
    same_shape = shape.get()[d] == meta.shape[d] || (meta.symbol(d) >= 0 && shape.get()[d] == -1);
  }
  if (!same_shape) {
    return Reject(what + " has shape " + ShapeString(meta.shape) +
                  " in the blob (dynamic dimensions at their max) but " + ShapeString(shape.get()) +
                  " in the engine; re-export the model.");
  }
  b->name = meta.name;
  b->mode = want;
  b->dtype = meta.dtype;
  b->shape = meta.shape;
  for (size_t d = 0; d < meta.shape.size(); ++d) {
    const int32_t k = meta.symbol(d);
    if (k >= static_cast<int32_t>(metadata.symbols.size())) {
      return Reject(what + " dimension " + std::to_string(d) + " names symbol " +
                    std::to_string(k) + ", which the metadata does not declare.");
    }
    b->dim_symbol.push_back(k);
  }
  b->is_static = meta.is_static();
  b->nbytes = NumBytes(meta.dtype, meta.shape);
  return Error::Ok;
}

// For kind kv_cache_update: the engine's own alias report agrees with `alias` (an engine that
// cannot tell is trusted).
Error CheckEngineAgrees(const AliasedIo& alias, const Engine& engine, const std::string& what) {
  const AliasReport report = engine.AliasedInput(alias.output);
  if (report.status == AliasReport::Status::kUnknown) {
    // The portable engine never reports (the blob decides its aliases) and TensorRT
    // < 10.15 cannot: the blob is trusted. Debug, compiled out by default
    // (ET_MIN_LOG_LEVEL Info): at Info it printed a line per cache on every load.
    ET_LOG(Debug,
           "executorch_trt: binding plan: the engine does not report aliases; trusting "
           "the blob for output '%s' -> input '%s'.",
           alias.output.c_str(), alias.input.c_str());
  } else if (report.status == AliasReport::Status::kNotAliased) {
    return Reject(what + ": the engine says output '" + alias.output +
                  "' aliases no input; the blob and the engine disagree, re-export.");
  } else if (report.input != alias.input) {
    return Reject(what + ": the engine says output '" + alias.output + "' aliases input '" +
                  report.input + "'; the blob and the engine disagree, re-export.");
  }
  return Error::Ok;
}

// Marks the output of `alias` as updating its input in place, after checking that both are
// delegate arguments of the right direction, neither is aliased already, the engine agrees,
// and the two describe the same static bytes. `aliased_inputs` collects the inputs aliased so
// far.
Error PlanAlias(const AliasedIo& alias, const Engine& engine,
                const std::map<std::string, size_t>& arg_by_name, size_t num_inputs,
                std::vector<PlannedBinding>* bindings, std::set<std::string>* aliased_inputs) {
  const std::string what = std::string("aliased_io entry (output '") + alias.output +
                           "' -> input '" + alias.input + "', kind " + AliasKindName(alias.kind) +
                           ")";
  auto out_it = arg_by_name.find(alias.output);
  auto in_it = arg_by_name.find(alias.input);
  if (out_it == arg_by_name.end() || out_it->second < num_inputs) {
    return Reject(what + ": '" + alias.output +
                  "' is not a delegate output; the blob is inconsistent, re-export.");
  }
  if (in_it == arg_by_name.end() || in_it->second >= num_inputs) {
    return Reject(what + ": '" + alias.input +
                  "' is not a delegate input; the blob is inconsistent, re-export.");
  }
  PlannedBinding& out = (*bindings)[out_it->second];
  const PlannedBinding& in = (*bindings)[in_it->second];
  if (out.aliased) {
    return Reject(what + ": output '" + alias.output + "' is already aliased to input '" +
                  (*bindings)[out.alias_input_arg].name + "'; one alias per output.");
  }
  if (!aliased_inputs->insert(alias.input).second) {
    return Reject(what + ": input '" + alias.input +
                  "' is already aliased by another output; two outputs cannot update one "
                  "input in place.");
  }
  if (alias.kind == AliasKind::kKvCacheUpdate) {
    const Error err = CheckEngineAgrees(alias, engine, what);
    if (err != Error::Ok) {
      return err;
    }
  }
  // Both kinds share one storage, so they must describe the same bytes. For
  // kv_cache_update the engine agrees with the alias, so a mismatch means a corrupt
  // engine; for user it is the only check there is.
  if (in.dtype != out.dtype || in.shape != out.shape || in.dim_symbol != out.dim_symbol) {
    return Reject(what + ": input is " + DTypeName(in.dtype) + " " + ShapeString(in.shape) +
                  " but output is " + DTypeName(out.dtype) + " " + ShapeString(out.shape) +
                  "; an output can only alias an input of the same dtype and shape. Fix "
                  "the alias declaration and re-export.");
  }
  if (!in.is_static) {
    return Reject(what + ": input '" + alias.input + "' has a dynamic shape " +
                  ShapeString(in.shape) +
                  " (upper bounds); aliased (state) bindings must be static, re-export.");
  }
  out.aliased = true;
  out.alias_input_arg = in_it->second;
  out.alias_kind = alias.kind;
  return Error::Ok;
}

// An engine alias the blob does not declare would let the engine write into an input
// the delegate treats as read-only: reject it rather than corrupt caller state.
Error RejectUndeclaredEngineAliases(const Engine& engine,
                                    const std::vector<PlannedBinding>& bindings,
                                    size_t num_inputs) {
  for (size_t i = num_inputs; i < bindings.size(); ++i) {
    const PlannedBinding& out = bindings[i];
    const AliasReport report = engine.AliasedInput(out.name);
    if (report.status == AliasReport::Status::kAliased && !out.aliased) {
      return Reject("the engine updates input '" + report.input + "' in place through " +
                    "output '" + out.name +
                    "' but the blob declares no such alias; "
                    "re-export so aliased_io records it.");
    }
  }
  return Error::Ok;
}

}  // namespace

Result<BindingPlan> BindingPlan::Create(const DelegateMetadata& metadata, const Engine& engine) {
  Error err = CheckCounts(metadata, engine);
  if (err == Error::Ok) {
    err = CheckSymbolsAreInputDimensions(metadata);
  }
  if (err != Error::Ok) {
    return err;
  }
  BindingPlan plan;
  plan.num_inputs_ = metadata.inputs.size();
  plan.symbols_ = metadata.symbols;
  // Delegate argument order: metadata inputs, then outputs.
  std::map<std::string, size_t> arg_by_name;
  for (size_t i = 0; i < metadata.inputs.size() + metadata.outputs.size(); ++i) {
    const bool is_input = i < metadata.inputs.size();
    const TensorBinding& meta =
        is_input ? metadata.inputs[i] : metadata.outputs[i - metadata.inputs.size()];
    const TensorIOMode want = is_input ? TensorIOMode::kInput : TensorIOMode::kOutput;
    const std::string what = std::string(TensorIOModeName(want)) + " '" + meta.name +
                             "' (delegate argument " + std::to_string(i) + ")";
    if (!arg_by_name.emplace(meta.name, i).second) {
      return Reject(what + " repeats the name of delegate argument " +
                    std::to_string(arg_by_name[meta.name]) +
                    "; binding names must be unique, re-export the model.");
    }
    PlannedBinding b;
    err = PlanBinding(metadata, engine, meta, want, what, &b);
    if (err != Error::Ok) {
      return err;
    }
    plan.bindings_.push_back(std::move(b));
  }
  std::set<std::string> aliased_inputs;
  for (const AliasedIo& alias : metadata.aliased_io) {
    err = PlanAlias(alias, engine, arg_by_name, plan.num_inputs_, &plan.bindings_, &aliased_inputs);
    if (err != Error::Ok) {
      return err;
    }
  }
  err = RejectUndeclaredEngineAliases(engine, plan.bindings_, plan.num_inputs_);
  if (err != Error::Ok) {
    return err;
  }
  return plan;
}

}  // namespace executorch_trt
