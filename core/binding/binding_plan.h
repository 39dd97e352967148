// Copyright (c) executorch-trt authors.
//
// binding_plan.h: how the delegate's ExecuTorch arguments map onto engine bindings.
//
// The plan is computed once at init from the blob metadata and the engine, validated
// against both, and then followed by every execute(): delegate argument i binds to the
// engine binding recorded at position i (inputs in metadata.inputs order, then outputs
// in metadata.outputs order), and every aliased output is bound to the storage of the
// input it aliases, so the engine updates caller-owned state in place.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>
#include <executorch/runtime/core/span.h>

#include "core/blob/delegate_metadata.h"
#include "core/engine/engine.h"

namespace executorch_trt {

// One delegate argument and the engine binding it feeds.
struct PlannedBinding {
  std::string name;  // engine binding name
  TensorIOMode mode = TensorIOMode::kNone;
  executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float;
  // Static sizes, and each dynamic dimension's upper bound (its symbol's max).
  std::vector<int64_t> shape;
  // Per dimension: -1 static, else the index of its symbol in BindingPlan::symbols().
  std::vector<int32_t> dim_symbol;
  bool is_static = true;
  size_t nbytes = 0;  // bytes of `shape` (the upper bound when dynamic)
  // Outputs only: true if this output updates an input in place.
  bool aliased = false;
  size_t alias_input_arg = 0;  // delegate argument index of that input
  AliasKind alias_kind = AliasKind::kKvCacheUpdate;
};

// The validated mapping between delegate arguments and engine bindings.
//
// Immutable after Create(); Execute() is const and keeps no per-call state in the plan,
// so the plan itself is thread-safe (the Engine it drives is not; see Engine).
class BindingPlan {
 public:
  // Builds the plan for `metadata` over `engine`, rejecting (each with an ET_LOG line
  // that names the binding, the expected and actual values, and what to do):
  //   - metadata input/output counts that differ from the engine's;
  //   - duplicate names in metadata inputs/outputs;
  //   - names that are not engine bindings, or whose engine IO mode is the other one;
  //   - dtype or shape that differ between metadata and engine;
  //   - aliased_io entries whose output is not a metadata output or whose input is not
  //     a metadata input, an output aliased twice, an input aliased by two outputs;
  //   - kind kv_cache_update where the engine reports a different input or no alias
  //     (an engine that cannot tell, e.g. TensorRT < 10.15, is trusted with a log line);
  //   - kind user whose input and output differ in dtype or shape;
  //   - an engine alias the metadata does not declare (the engine would write into an
  //     input the delegate treats as read-only);
  //   - (format version 2) a symbol that is no input's dimension, an aliased binding with
  //     a dynamic dimension, or an engine dimension that is neither -1 nor the symbol's
  //     max where the metadata has a dynamic one.
  // All of these are Error::InvalidProgram. `engine` is only read; neither argument is
  // retained.
  static executorch::runtime::Result<BindingPlan> Create(const DelegateMetadata& metadata,
                                                         const Engine& engine);

  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return bindings_.size() - num_inputs_; }
  size_t num_args() const { return bindings_.size(); }
  // Binding of delegate argument `index` (< num_args()).
  const PlannedBinding& arg(size_t index) const { return bindings_[index]; }
  // The dynamic dimensions (empty for a static delegate).
  const std::vector<SymbolRange>& symbols() const { return symbols_; }

  // Runs `engine` on the delegate arguments `args` (inputs, then outputs).
  //
  // Checks the argument count and each argument's type (tensor), dtype and shape
  // against the plan (Error::InvalidArgument, logged with the argument, the dimension,
  // the value and the range, before touching the engine): static dimensions must match;
  // each dynamic input dimension must lie in its symbol's [min, max] and equal every
  // other dimension of the same symbol. Each dynamic output is resized (ExecuTorch
  // resize_tensor) to its sizes for this call, and its storage must hold its upper bound
  // (ExecuTorch plans a dynamic-bound tensor at its upper bound). Then it sets each
  // input's shape, binds each input to its tensor's storage, each non-aliased output to
  // its own storage and each aliased output to its *input's* storage; runs the engine;
  // checks that each dynamic output came out with the sizes the symbols give
  // (Error::InvalidState otherwise); then,
  // for an aliased output whose tensor has different storage than its input (ExecuTorch
  // passed a separate output tensor), copies the updated input into it and adds the
  // bytes to the process copy counter (copy_counter.h). When the exporter made the
  // output the same value as the input, nothing is copied.
  // Engine errors are returned unchanged. Borrows `args` for the call only.
  executorch::runtime::Error Execute(
      Engine& engine, executorch::runtime::Span<executorch::runtime::EValue*> args) const;

 private:
  BindingPlan() = default;

  // Checks every input's shape against the plan and records each symbol's value in
  // `values` (sized symbols_.size()); InvalidArgument, logged, on a mismatch.
  executorch::runtime::Error ResolveSymbols(
      executorch::runtime::Span<executorch::runtime::EValue*> args,
      std::vector<int64_t>* values) const;

  std::vector<PlannedBinding> bindings_;  // delegate argument order
  std::vector<SymbolRange> symbols_;
  size_t num_inputs_ = 0;
};

}  // namespace executorch_trt
