// Copyright (c) executorch-trt authors.

#include "benchmarks/decode_step_flags.h"

#include <limits>

#include <absl/flags/flag.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>

namespace executorch_trt::benchmarks {

// --caches: "NAME=NUMEL,NAME=NUMEL,...", every KV cache and its float32 element count.
struct CacheList {
  std::vector<extension::CacheBuffer> caches;
};

// --prompt: "ID,ID,...", token ids >= 0.
struct TokenIds {
  std::vector<int64_t> ids;
};

// Abseil's parsers of the two (found by argument-dependent lookup); false for any malformed
// item. Messages come from the flag's expectation (ParseDecodeStepFlags).
bool AbslParseFlag(absl::string_view text, CacheList* out, std::string* /*error*/) {
  out->caches.clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const size_t eq = part.rfind('=');
    extension::CacheBuffer cache;
    if (eq == absl::string_view::npos || eq == 0 ||
        !absl::SimpleAtoi(part.substr(eq + 1), &cache.numel) || cache.numel < 1) {
      return false;
    }
    cache.name = std::string(part.substr(0, eq));
    out->caches.push_back(cache);
  }
  return true;
}

std::string AbslUnparseFlag(const CacheList& list) {
  return absl::StrJoin(list.caches, ",", [](std::string* out, const extension::CacheBuffer& c) {
    out->append(c.name + "=" + std::to_string(c.numel));
  });
}

bool AbslParseFlag(absl::string_view text, TokenIds* out, std::string* /*error*/) {
  out->ids.clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return false;
    }
    out->ids.push_back(id);
  }
  return true;
}

std::string AbslUnparseFlag(const TokenIds& ids) { return absl::StrJoin(ids.ids, ","); }

}  // namespace executorch_trt::benchmarks

using executorch_trt::benchmarks::CacheList;
using executorch_trt::benchmarks::TokenIds;

ABSL_FLAG(std::string, model, "", "the .pte with methods prefill and decode");
ABSL_FLAG(CacheList, caches, {}, "every KV cache as NAME=NUMEL, comma-separated");
ABSL_FLAG(TokenIds, prompt, {}, "prefill token ids, comma-separated");
ABSL_FLAG(int64_t, max_seq_len, 0, "cache capacity in positions");
ABSL_FLAG(int64_t, token, 1, "the decode step's token id");
ABSL_FLAG(int64_t, warmup, 5, "untimed decode steps first");
ABSL_FLAG(int64_t, repeats, 100, "timed decode steps");
ABSL_FLAG(int64_t, threads, 0, "ExecuTorch's CPU thread pool size (0: its own default)");
ABSL_FLAG(std::string, json, "", "where to write the JSON result (default: stdout)");

namespace executorch_trt::benchmarks {
namespace {

constexpr int64_t kMaxCount = 1000000;  // warm-up and timed steps
constexpr int64_t kMaxThreads = 1024;

std::function<bool(const int64_t&)> Between(int64_t lo, int64_t hi) {
  return [lo, hi](const int64_t& v) { return v >= lo && v <= hi; };
}

std::string Range(int64_t lo, int64_t hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

bool NotEmpty(const std::string& s) { return !s.empty(); }

}  // namespace

ParseStatus ParseDecodeStepFlags(int argc, char** argv, DecodeStepFlags* flags,
                                 std::string* error) {
  using examples::MakeToolFlag;
  constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
  const std::vector<examples::ToolFlag> tool_flags = {
      MakeToolFlag(FLAGS_model, "a path to a .pte file", NotEmpty),
      MakeToolFlag(FLAGS_json, "a file path", NotEmpty),
      MakeToolFlag(FLAGS_caches,
                   "comma-separated NAME=NUMEL (every KV cache buffer and its element count)"),
      MakeToolFlag(FLAGS_prompt, "comma-separated token ids (integers >= 0)"),
      MakeToolFlag(FLAGS_token, "a token id (an integer >= 0)", Between(0, kMaxId)),
      MakeToolFlag(FLAGS_max_seq_len, "a positive integer (the cache capacity in positions)",
                   Between(1, kMaxId)),
      MakeToolFlag(FLAGS_warmup, Range(0, kMaxCount), Between(0, kMaxCount)),
      MakeToolFlag(FLAGS_repeats, Range(1, kMaxCount), Between(1, kMaxCount)),
      MakeToolFlag(FLAGS_threads, Range(0, kMaxThreads) + " (0: ExecuTorch's default)",
                   Between(0, kMaxThreads)),
  };
  const ParseStatus status = examples::ParseCommandLine(argc, argv, tool_flags, error);
  if (status != ParseStatus::kRun) {
    return status;
  }
  flags->model = examples::ResolveUserPath(absl::GetFlag(FLAGS_model));
  flags->json = examples::ResolveUserPath(absl::GetFlag(FLAGS_json));
  flags->caches = absl::GetFlag(FLAGS_caches).caches;
  flags->prompt = absl::GetFlag(FLAGS_prompt).ids;
  flags->token = absl::GetFlag(FLAGS_token);
  flags->max_seq_len = absl::GetFlag(FLAGS_max_seq_len);
  flags->warmup = absl::GetFlag(FLAGS_warmup);
  flags->repeats = absl::GetFlag(FLAGS_repeats);
  flags->threads = absl::GetFlag(FLAGS_threads);
  for (const char* required : {"--model", "--caches", "--prompt", "--max-seq-len"}) {
    const std::string name = required;
    if ((name == "--model" && flags->model.empty()) ||
        (name == "--caches" && flags->caches.empty()) ||
        (name == "--prompt" && flags->prompt.empty()) ||
        (name == "--max-seq-len" && flags->max_seq_len == 0)) {
      *error = name + " is required";
      return ParseStatus::kUsage;
    }
  }
  const auto prompt_len = static_cast<int64_t>(flags->prompt.size());
  if (prompt_len >= flags->max_seq_len) {
    *error = "--max-seq-len " + std::to_string(flags->max_seq_len) +
             " must exceed the prompt length " + std::to_string(prompt_len) +
             " (--prompt): the decode step runs at position " + std::to_string(prompt_len);
    return ParseStatus::kUsage;
  }
  return ParseStatus::kRun;
}

}  // namespace executorch_trt::benchmarks
