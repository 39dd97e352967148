// Copyright (c) executorch-trt authors.
//
// delegate_metadata.h: the metadata JSON of a delegate blob (docs/formats/delegate_blob.md).
//
// The metadata is the exporter's statement of the delegate's interface: the engine that
// runs it, the tensors bound to each delegate argument (in argument order), and which
// outputs update which inputs in place, who enforces that alias (`kind`) and who owns
// the storage (`ownership`). It is decided once at export and never re-derived here.

#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/result.h>

namespace executorch_trt {

// Which engine executes the payload.
enum class EngineKind {
  kPortable,  // nested ExecuTorch program (docs/formats/portable_payload.md)
  kTensorRT,  // serialized TensorRT plan
};

// Who enforces an alias between an output and an input.
enum class AliasKind {
  // The engine performs the in-place update; cross-checked against the engine's own
  // alias report (TensorRT >= 10.15 getAliasedInputTensor). Default for older blobs
  // that carry no `kind`.
  kKvCacheUpdate,
  // Declared by the exporter; the engine cannot report it (a full overwrite of a buffer, or
  // a torch.cond cross-attention cache the nested program updates where it is bound). Shape
  // and dtype are checked.
  kUser,
};

// Who owns the storage an aliased pair shares.
enum class Ownership {
  // The storage lives above the delegate (an ExecuTorch mutable buffer or memory the
  // application binds). The only ownership of format version 1.
  kCaller,
};

// Most dimensions a binding may have (ExecuTorch's kTensorDimensionLimit; Python
// wire.MAX_RANK).
inline constexpr size_t kMaxBindingRank = 16;

// A dynamic dimension (format version 2, `symbols`): every binding dimension that names it
// has the same size in one call, within [min, max]. `opt` (min <= opt <= max) is the size
// to tune for: a TensorRT optimization profile's opt shape. Sizes are element counts.
struct SymbolRange {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  int64_t opt = 0;
};

// One tensor binding: an engine binding name with its element type and shape.
struct TensorBinding {
  std::string name;
  executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float;
  // Per dimension: the static size, or for a dynamic dimension its symbol's `max` (the
  // upper bound, which ExecuTorch plans memory for).
  std::vector<int64_t> shape;
  // Per dimension: -1 for a static size, else the index of its symbol in
  // DelegateMetadata::symbols. Parse fills one entry per dimension; empty means static.
  std::vector<int32_t> dim_symbol = {};

  // The symbol index of dimension `d`, -1 if it is static.
  int32_t symbol(size_t d) const { return d < dim_symbol.size() ? dim_symbol[d] : -1; }
  bool is_static() const {
    for (int32_t s : dim_symbol) {
      if (s >= 0) {
        return false;
      }
    }
    return true;
  }
};

// One aliased output -> input pair.
struct AliasedIo {
  std::string output;  // name of an entry of DelegateMetadata::outputs
  std::string input;   // name of an entry of DelegateMetadata::inputs
  AliasKind kind = AliasKind::kKvCacheUpdate;
  Ownership ownership = Ownership::kCaller;
};

// The decoded metadata JSON.
struct DelegateMetadata {
  EngineKind engine = EngineKind::kPortable;
  // Delegate argument order: args[i] binds inputs[i]; args[inputs.size() + j] binds
  // outputs[j].
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> outputs;
  std::vector<AliasedIo> aliased_io;
  // Dynamic dimensions (format version 2); empty for a static delegate.
  std::vector<SymbolRange> symbols;

  // Parses `json_text` (the blob's metadata section) with `required_features` and
  // `format_version` from the blob header.
  //
  // Structural validation only: the JSON is an object; `engine` is "portable" or
  // "tensorrt"; `symbols` (format version 2 only, optional) is an array of {name:
  // non-empty unique string, min, max, opt: integers with 0 <= min <= opt <= max < 2^31};
  // `inputs`/`outputs` are arrays of {name: non-empty string, dtype: a blob dtype, shape:
  // array of at most kMaxBindingRank entries, each an integer in [0, 2^31) or the name of a
  // declared symbol}; `aliased_io` (optional, default
  // empty) is an array of {output, input: strings, kind?: "kv_cache_update" | "user"
  // (missing means "kv_cache_update"), ownership: "caller"}. `ownership` may be omitted
  // only when the header does not set kBlobFeatureOwnership (it then means "caller").
  // Non-empty `aliased_io` requires kBlobFeatureAliasedIo in `required_features`.
  // Cross-checks against the engine (names exist, counts, shapes) are BindingPlan's job.
  //
  // Errors: Error::InvalidProgram with an ET_LOG line naming the offending field and
  // value (unknown kind / ownership / dtype / engine, missing or mistyped field,
  // malformed JSON). Never throws. Thread-safe; the result owns all its strings.
  static executorch::runtime::Result<DelegateMetadata> Parse(std::string_view json_text,
                                                             uint64_t required_features,
                                                             uint32_t format_version = 1);
};

// The metadata's name of each value ("kv_cache_update", "user"; "caller"; "portable",
// "tensorrt"), from the same tables Parse reads; "?" for a value outside the enum. Never
// fails.
const char* AliasKindName(AliasKind kind);
const char* OwnershipName(Ownership ownership);
const char* EngineKindName(EngineKind engine);

}  // namespace executorch_trt
