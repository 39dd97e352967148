// Copyright (c) executorch-trt authors.

#include "core/blob/delegate_metadata.h"

#include <limits>
#include <map>
#include <set>
#include <utility>

#include <executorch/runtime/platform/log.h>
#include <nlohmann/json.hpp>

#include "core/blob/blob_header.h"
#include "core/blob/dtype_name.h"

namespace executorch_trt {
namespace {

using executorch::runtime::Error;
using executorch::runtime::Result;
using json = nlohmann::json;

// The metadata's names for each enum, written once: Parse reads them, the *Name functions
// print them, and the error messages list them (docs/formats/delegate_blob.md "Metadata";
// Python: executorch_trt.format.wire).
template <typename Enum>
struct WireName {
  const char* name;
  Enum value;
};

constexpr WireName<EngineKind> kEngineNames[] = {
    {"portable", EngineKind::kPortable},
    {"tensorrt", EngineKind::kTensorRT},
};
constexpr WireName<AliasKind> kAliasKindNames[] = {
    {"kv_cache_update", AliasKind::kKvCacheUpdate},
    {"user", AliasKind::kUser},
};
constexpr WireName<Ownership> kOwnershipNames[] = {
    {"caller", Ownership::kCaller},
};

// The value called `name` in `table`, or false.
template <typename Enum, size_t N>
bool FindValue(const WireName<Enum> (&table)[N], const std::string& name, Enum* value) {
  for (const WireName<Enum>& entry : table) {
    if (name == entry.name) {
      *value = entry.value;
      return true;
    }
  }
  return false;
}

// The name of `value` in `table`, or "?" for a value outside the enum.
template <typename Enum, size_t N>
const char* FindName(const WireName<Enum> (&table)[N], Enum value) {
  for (const WireName<Enum>& entry : table) {
    if (entry.value == value) {
      return entry.name;
    }
  }
  return "?";
}

// "'a', 'b'": the names of `table`, for error messages.
template <typename Enum, size_t N>
std::string KnownNames(const WireName<Enum> (&table)[N]) {
  std::string out;
  for (const WireName<Enum>& entry : table) {
    out += std::string(out.empty() ? "'" : ", '") + entry.name + "'";
  }
  return out;
}

// All accessors below use only non-throwing nlohmann calls (is_*/find/get_ref on a
// checked type), so no exception can escape even though the library supports them.

Error Fail(const std::string& message) {
  ET_LOG(Error, "executorch_trt: blob metadata: %s", message.c_str());
  return Error::InvalidProgram;
}

// Returns the string member `key` of `obj` in `*out`; false (and logs) if missing or
// not a string.
bool GetString(const json& obj, const char* key, const std::string& where, std::string* out,
               bool* missing = nullptr) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (missing != nullptr) {
      *missing = true;
      return true;
    }
    Fail(where + " has no '" + key + "'; re-export the model.");
    return false;
  }
  if (!it->is_string()) {
    Fail(where + " field '" + key + "' must be a string, got " + it->type_name() + ".");
    return false;
  }
  *out = it->get_ref<const std::string&>();
  if (missing != nullptr) {
    *missing = false;
  }
  return true;
}

// An integer JSON value in [0, 2^31) in `*out`; false for anything else (a float, a bool, a
// negative or larger number). get<>() on a value known to be a number cannot throw.
bool GetSize(const json& value, int64_t* out) {
  int64_t v = -1;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    v = u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ? static_cast<int64_t>(u)
                                                                        : -1;
  } else if (value.is_number_integer()) {
    v = value.get<int64_t>();
  }
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  *out = v;
  return true;
}

Result<SymbolRange> ParseSymbol(const json& entry, size_t index) {
  const std::string where = "symbols[" + std::to_string(index) + "]";
  if (!entry.is_object()) {
    return Fail(where + " must be an object, got " + entry.type_name() + ".");
  }
  SymbolRange symbol;
  if (!GetString(entry, "name", where, &symbol.name)) {
    return Error::InvalidProgram;
  }
  if (symbol.name.empty()) {
    return Fail(where + " has an empty 'name'.");
  }
  const struct {
    const char* key;
    int64_t* value;
  } fields[] = {{"min", &symbol.min}, {"max", &symbol.max}, {"opt", &symbol.opt}};
  for (const auto& field : fields) {
    auto it = entry.find(field.key);
    if (it == entry.end() || !GetSize(*it, field.value)) {
      return Fail(
          "symbol '" + symbol.name + "' field '" + field.key + "' must be an integer in [0, 2^31)" +
          (it == entry.end() ? std::string(", it is missing.") : ", got " + it->dump()) + ".");
    }
  }
  if (!(symbol.min <= symbol.opt && symbol.opt <= symbol.max)) {
    return Fail("symbol '" + symbol.name + "' needs min <= opt <= max, got min " +
                std::to_string(symbol.min) + ", opt " + std::to_string(symbol.opt) + ", max " +
                std::to_string(symbol.max) + "; re-export the model.");
  }
  return symbol;
}

Error ParseSymbols(const json& root, uint32_t format_version, std::vector<SymbolRange>* out) {
  auto list = root.find("symbols");
  if (list == root.end()) {
    return Error::Ok;
  }
  if (format_version < kBlobFormatVersionDynamic) {
    return Fail("'symbols' needs format_version " + std::to_string(kBlobFormatVersionDynamic) +
                ", the header says " + std::to_string(format_version) +
                "; the blob is corrupt, re-export it.");
  }
  if (!list->is_array()) {
    return Fail(std::string("'symbols' must be an array, got ") + list->type_name() + ".");
  }
  size_t index = 0;
  std::set<std::string> names;
  for (const json& entry : *list) {
    Result<SymbolRange> symbol = ParseSymbol(entry, index++);
    if (!symbol.ok()) {
      return symbol.error();
    }
    if (!names.insert(symbol->name).second) {
      return Fail("symbol '" + symbol->name + "' is declared twice; re-export the model.");
    }
    out->push_back(std::move(symbol.get()));
  }
  return Error::Ok;
}

// `symbol_index` maps each name of `symbols` to its index.
Result<TensorBinding> ParseBinding(const json& entry, const std::string& where,
                                   const std::vector<SymbolRange>& symbols,
                                   const std::map<std::string, size_t>& symbol_index) {
  if (!entry.is_object()) {
    return Fail(where + " must be an object, got " + entry.type_name() + ".");
  }
  TensorBinding binding;
  if (!GetString(entry, "name", where, &binding.name)) {
    return Error::InvalidProgram;
  }
  if (binding.name.empty()) {
    return Fail(where + " has an empty 'name'.");
  }
  const std::string named = where + " '" + binding.name + "'";
  std::string dtype;
  if (!GetString(entry, "dtype", named, &dtype)) {
    return Error::InvalidProgram;
  }
  Result<executorch::aten::ScalarType> type = ParseDTypeName(dtype, named);
  if (!type.ok()) {
    return type.error();
  }
  binding.dtype = type.get();
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return Fail(named + " needs 'shape' as an array of non-negative integers.");
  }
  // Every entry's type first, then the symbol names: the Python reader's order, so both
  // report the same first problem.
  int64_t value = -1;
  for (const json& dim : *shape) {
    if (!GetSize(dim, &value) && !dim.is_string()) {
      return Fail(named + " has shape entry " + dim.dump() +
                  "; dimensions must be integers in [0, 2^31) or (format version 2) names "
                  "of symbols.");
    }
  }
  for (const json& dim : *shape) {
    if (GetSize(dim, &value)) {
      binding.shape.push_back(value);
      binding.dim_symbol.push_back(-1);
      continue;
    }
    const std::string& name = dim.get_ref<const std::string&>();
    auto found = symbol_index.find(name);
    if (found == symbol_index.end()) {
      return Fail(named + " dimension " + std::to_string(binding.shape.size()) + " names symbol '" +
                  name + "', which 'symbols' does not declare.");
    }
    binding.shape.push_back(symbols[found->second].max);
    binding.dim_symbol.push_back(static_cast<int32_t>(found->second));
  }
  if (binding.shape.size() > kMaxBindingRank) {
    return Fail(named + " has " + std::to_string(binding.shape.size()) + " dimensions; at most " +
                std::to_string(kMaxBindingRank) + " are supported.");
  }
  return binding;
}

Error ParseBindings(const json& root, const char* key, const std::vector<SymbolRange>& symbols,
                    std::vector<TensorBinding>* out) {
  auto list = root.find(key);
  if (list == root.end() || !list->is_array()) {
    return Fail(std::string("'") + key + "' must be an array of bindings.");
  }
  const std::string singular = std::string(key).substr(0, std::string(key).size() - 1);
  std::map<std::string, size_t> symbol_index;
  for (size_t k = 0; k < symbols.size(); ++k) {
    symbol_index.emplace(symbols[k].name, k);
  }
  size_t index = 0;
  for (const json& entry : *list) {
    Result<TensorBinding> binding =
        ParseBinding(entry, singular + " " + std::to_string(index), symbols, symbol_index);
    if (!binding.ok()) {
      return binding.error();
    }
    out->push_back(std::move(binding.get()));
    ++index;
  }
  return Error::Ok;
}

Result<AliasedIo> ParseAlias(const json& entry, size_t index, uint64_t required_features) {
  const std::string where = "aliased_io[" + std::to_string(index) + "]";
  if (!entry.is_object()) {
    return Fail(where + " must be an object, got " + entry.type_name() + ".");
  }
  AliasedIo alias;
  if (!GetString(entry, "output", where, &alias.output) ||
      !GetString(entry, "input", where, &alias.input)) {
    return Error::InvalidProgram;
  }
  const std::string named =
      where + " (output '" + alias.output + "' -> input '" + alias.input + "')";
  std::string kind;
  bool kind_missing = false;
  if (!GetString(entry, "kind", named, &kind, &kind_missing)) {
    return Error::InvalidProgram;
  }
  if (kind_missing) {
    alias.kind = AliasKind::kKvCacheUpdate;  // older writers omit `kind`
  } else if (!FindValue(kAliasKindNames, kind, &alias.kind)) {
    return Fail(named + " has unknown kind '" + kind + "'; this runtime knows " +
                KnownNames(kAliasKindNames) +
                ". The blob comes from a newer or broken exporter: re-export with a "
                "matching version.");
  }
  std::string ownership;
  bool ownership_missing = false;
  if (!GetString(entry, "ownership", named, &ownership, &ownership_missing)) {
    return Error::InvalidProgram;
  }
  if (ownership_missing) {
    if ((required_features & kBlobFeatureOwnership) != 0) {
      return Fail(named +
                  " has no 'ownership' although the blob requires the OWNERSHIP "
                  "feature; the blob is corrupt, re-export it.");
    }
    alias.ownership = Ownership::kCaller;
  } else if (!FindValue(kOwnershipNames, ownership, &alias.ownership)) {
    return Fail(named + " has unknown ownership '" + ownership + "'; this runtime supports " +
                KnownNames(kOwnershipNames) +
                " (storage owned above the delegate). Re-export with caller-owned state.");
  }
  return alias;
}

}  // namespace

Result<DelegateMetadata> DelegateMetadata::Parse(std::string_view json_text,
                                                 uint64_t required_features,
                                                 uint32_t format_version) {
  json root = json::parse(json_text.begin(), json_text.end(), /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Fail("not valid JSON (" + std::to_string(json_text.size()) +
                " bytes); the blob is corrupt, re-export it.");
  }
  if (!root.is_object()) {
    return Fail(std::string("top level must be an object, got ") + root.type_name() + ".");
  }
  DelegateMetadata metadata;
  std::string engine;
  if (!GetString(root, "engine", "metadata", &engine)) {
    return Error::InvalidProgram;
  }
  if (!FindValue(kEngineNames, engine, &metadata.engine)) {
    return Fail("unknown engine '" + engine + "'; expected one of " + KnownNames(kEngineNames) +
                ".");
  }
  Error err = ParseSymbols(root, format_version, &metadata.symbols);
  if (err != Error::Ok) {
    return err;
  }
  err = ParseBindings(root, "inputs", metadata.symbols, &metadata.inputs);
  if (err != Error::Ok) {
    return err;
  }
  err = ParseBindings(root, "outputs", metadata.symbols, &metadata.outputs);
  if (err != Error::Ok) {
    return err;
  }
  auto aliases = root.find("aliased_io");
  if (aliases != root.end()) {
    if (!aliases->is_array()) {
      return Fail(std::string("'aliased_io' must be an array, got ") + aliases->type_name() + ".");
    }
    size_t index = 0;
    for (const json& entry : *aliases) {
      Result<AliasedIo> alias = ParseAlias(entry, index++, required_features);
      if (!alias.ok()) {
        return alias.error();
      }
      metadata.aliased_io.push_back(std::move(alias.get()));
    }
  }
  if (!metadata.aliased_io.empty() && (required_features & kBlobFeatureAliasedIo) == 0) {
    // Same rule as the Python reader: a reader that ignored the entries would bind the
    // wrong storage, so the writer must require the feature.
    return Fail(std::to_string(metadata.aliased_io.size()) +
                " aliased_io entries but required_features lacks ALIASED_IO; the blob is "
                "corrupt or from a broken writer, re-export it.");
  }
  return metadata;
}

const char* AliasKindName(AliasKind kind) { return FindName(kAliasKindNames, kind); }

const char* OwnershipName(Ownership ownership) { return FindName(kOwnershipNames, ownership); }

const char* EngineKindName(EngineKind engine) { return FindName(kEngineNames, engine); }

}  // namespace executorch_trt
