// Copyright (c) executorch-trt authors.
//
// llm_metadata.h: the constant methods ExecuTorch's LLM runner reads from a program
// (extension/llm/runner: get_llm_metadata, get_eos_ids), read the same way: each method that is
// there is executed and its result read as an integer scalar (a bool reads as 0/1);
// get_eos_ids returns one per end-of-sequence id. py/executorch_trt/llm/metadata.py names them
// and export_llm writes them.

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/runtime_types.h"
#include "extension/program/loaded_program.h"

namespace executorch_trt::extension::llm {

inline constexpr char kMaxSeqLen[] = "get_max_seq_len";          // tokens per call
inline constexpr char kMaxContextLen[] = "get_max_context_len";  // cache positions
inline constexpr char kVocabSize[] = "get_vocab_size";
inline constexpr char kBosId[] = "get_bos_id";
inline constexpr char kEosIds[] = "get_eos_ids";
inline constexpr char kUseKvCache[] = "use_kv_cache";
inline constexpr char kEnableDynamicShape[] = "enable_dynamic_shape";

// The values of the metadata methods the program has (unset: no such method).
struct LlmMetadata {
  std::optional<int64_t> max_seq_len;
  std::optional<int64_t> max_context_len;
  std::optional<int64_t> vocab_size;
  std::optional<int64_t> bos_id;
  std::optional<std::vector<int64_t>> eos_ids;
  std::optional<bool> use_kv_cache;
  std::optional<bool> enable_dynamic_shape;
};

// Whether `method` is one of the names above (a constant method, not one that runs tokens).
bool IsLlmMetadataMethod(const std::string& method);

// Runs each metadata method `program` has loaded (no inputs) and reads its value into *out.
// Errors (*error names `what` and the method): the method fails to execute (its error), or it
// returns something other than integer or bool scalars (a one-element integer or bool tensor
// counts as a scalar) (Error::InvalidProgram). Call it before any session runs: it executes
// methods of the program (no locking here).
Error ReadLlmMetadata(LoadedProgram& program, const std::string& what, LlmMetadata* out,
                      std::string* error);

}  // namespace executorch_trt::extension::llm
