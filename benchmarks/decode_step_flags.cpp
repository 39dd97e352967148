// Copyright (c) executorch-trt authors.

#include "benchmarks/decode_step_flags.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace executorch_trt::benchmarks {
namespace {

constexpr int64_t kMaxCount = 1000000;  // warm-up and timed steps
constexpr int64_t kMaxThreads = 1024;

// A whole decimal integer in [lo, hi]; false otherwise (empty, trailing text, overflow).
bool ParseInt(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty()) {
    return false;
  }
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) {
      return parts;
    }
    start = comma + 1;
  }
}

// "NAME=NUMEL,NAME=NUMEL,..." -> caches.
bool ParseCaches(const std::string& s, std::vector<extension::CacheBuffer>* caches) {
  caches->clear();
  for (const std::string& part : SplitCommas(s)) {
    const size_t eq = part.rfind('=');
    extension::CacheBuffer cache;
    if (eq == std::string::npos || eq == 0 ||
        !ParseInt(part.substr(eq + 1), 1, std::numeric_limits<int64_t>::max(), &cache.numel)) {
      return false;
    }
    cache.name = part.substr(0, eq);
    caches->push_back(cache);
  }
  return true;
}

bool ParseIds(const std::string& s, std::vector<int64_t>* ids) {
  ids->clear();
  for (const std::string& part : SplitCommas(s)) {
    int64_t id = 0;
    if (!ParseInt(part, 0, std::numeric_limits<int64_t>::max(), &id)) {
      return false;
    }
    ids->push_back(id);
  }
  return true;
}

std::string ResolveUserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr) {
    return path;
  }
  return std::string(cwd) + "/" + path;
}

// Sets flag `name` to `value`; false with *error naming the flag when `name` is unknown or
// `value` is invalid.
bool SetFlag(const std::string& name, const std::string& value, DecodeStepFlags* flags,
             std::string* error) {
  const auto bad = [&](const std::string& what) {
    *error = name + " must be " + what + ", got '" + value + "'";
    return false;
  };
  constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
  if (name == "--model") {
    if (value.empty()) {
      return bad("a path to a .pte file");
    }
    flags->model = ResolveUserPath(value);
  } else if (name == "--json") {
    if (value.empty()) {
      return bad("a file path");
    }
    flags->json = ResolveUserPath(value);
  } else if (name == "--caches") {
    if (!ParseCaches(value, &flags->caches)) {
      return bad("comma-separated NAME=NUMEL (every KV cache buffer and its element count)");
    }
  } else if (name == "--prompt") {
    if (!ParseIds(value, &flags->prompt)) {
      return bad("comma-separated token ids (integers >= 0)");
    }
  } else if (name == "--token") {
    if (!ParseInt(value, 0, kMaxId, &flags->token)) {
      return bad("a token id (an integer >= 0)");
    }
  } else if (name == "--max-seq-len") {
    if (!ParseInt(value, 1, kMaxId, &flags->max_seq_len)) {
      return bad("a positive integer (the cache capacity in positions)");
    }
  } else if (name == "--warmup") {
    if (!ParseInt(value, 0, kMaxCount, &flags->warmup)) {
      return bad("an integer in [0, " + std::to_string(kMaxCount) + "]");
    }
  } else if (name == "--repeats") {
    if (!ParseInt(value, 1, kMaxCount, &flags->repeats)) {
      return bad("an integer in [1, " + std::to_string(kMaxCount) + "]");
    }
  } else if (name == "--threads") {
    if (!ParseInt(value, 0, kMaxThreads, &flags->threads)) {
      return bad("an integer in [0, " + std::to_string(kMaxThreads) +
                 "] (0: ExecuTorch's default)");
    }
  } else {
    *error = "unknown flag " + name;
    return false;
  }
  return true;
}

}  // namespace

FlagStatus ParseDecodeStepFlags(int argc, char** argv, DecodeStepFlags* flags, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      return FlagStatus::kHelp;
    }
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + arg + "' (flags are --name VALUE or --name=VALUE)";
      return FlagStatus::kUsage;
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = "flag " + arg + " needs a value";
      return FlagStatus::kUsage;
    }
    if (!SetFlag(arg, value, flags, error)) {
      return FlagStatus::kUsage;
    }
  }
  for (const char* required : {"--model", "--caches", "--prompt", "--max-seq-len"}) {
    const std::string name = required;
    if ((name == "--model" && flags->model.empty()) ||
        (name == "--caches" && flags->caches.empty()) ||
        (name == "--prompt" && flags->prompt.empty()) ||
        (name == "--max-seq-len" && flags->max_seq_len == 0)) {
      *error = name + " is required";
      return FlagStatus::kUsage;
    }
  }
  const auto prompt_len = static_cast<int64_t>(flags->prompt.size());
  if (prompt_len >= flags->max_seq_len) {
    *error = "--max-seq-len " + std::to_string(flags->max_seq_len) +
             " must exceed the prompt length " + std::to_string(prompt_len) +
             " (--prompt): the decode step runs at position " + std::to_string(prompt_len);
    return FlagStatus::kUsage;
  }
  return FlagStatus::kRun;
}

}  // namespace executorch_trt::benchmarks
