// Copyright (c) executorch-trt authors.
//
// command_line.h: the command line of the project's C++ tools (kv_cache_decode_check,
// cross_attn_decode_check, //benchmarks:decode_step_cpp) over Abseil flags.
//
// Each tool defines its flags with ABSL_FLAG (type, default, help) and lists them with what a
// valid value is; ParseCommandLine reads argv into them. Abseil parses every value (its own
// parsers and a type's AbslParseFlag); this layer keeps what the tools promise their users and
// Abseil's parser does not: exit status 2 (not 1) on bad usage with a message naming the flag,
// "--help" and "-h", flag names with dashes (--max-seq-len for ABSL_FLAG max_seq_len), and only
// the tool's own flags (not Abseil's --flagfile and the like).

#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>

namespace executorch_trt::examples {

// Exit status of bad usage (an unknown flag, a bad value, a missing or unreadable input).
constexpr int kExitUsage = 2;

// A flag of a tool: the Abseil flag and what a valid value is.
struct ToolFlag {
  std::string
      name;  // the Abseil flag's name, e.g. "max_seq_len"; --max-seq-len on the command line
  bool is_bool = false;  // given alone (--quiet), never with a value
  // What a valid value is, e.g. "an integer in [0, 64]": a value Abseil cannot parse, or that
  // `valid` rejects, is reported as "--<name> must be <expected>, got '<value>'".
  std::string expected;
  // Whether the value just parsed is valid beyond its type (null: every value of the type).
  std::function<bool()> valid;
};

// The type T itself, where a template must not deduce T from an argument (so that a lambda
// converts to std::function<bool(const T&)>).
template <typename T>
struct NotDeduced {
  using type = T;
};

// `flag` as a ToolFlag; `valid` (may be null) judges its value after Abseil parsed it.
template <typename T>
ToolFlag MakeToolFlag(const absl::Flag<T>& flag, std::string expected = "",
                      typename NotDeduced<std::function<bool(const T&)>>::type valid = nullptr) {
  ToolFlag tool_flag;
  tool_flag.name = std::string(absl::GetFlagReflectionHandle(flag).Name());
  tool_flag.is_bool = std::is_same<T, bool>::value;
  tool_flag.expected = std::move(expected);
  if (valid) {
    tool_flag.valid = [&flag, valid] { return valid(absl::GetFlag(flag)); };
  }
  return tool_flag;
}

enum class ParseStatus {
  kRun,    // every flag given is set: run the tool
  kHelp,   // --help or -h: print the usage and exit 0
  kUsage,  // bad usage: *error says what (exit kExitUsage)
};

// Sets `flags` from argv[1, argc): `--name VALUE` or `--name=VALUE`, a bool flag as `--name`
// alone. Stops at --help or -h (kHelp). kUsage with *error on: an argument that is not a flag,
// an unknown flag (one not in `flags`), a flag without its value, a value given to a bool flag,
// a value Abseil cannot parse or `valid` rejects. A flag given twice keeps the last value.
// Never exits; never throws. Call once per process (Abseil flags are process-wide).
ParseStatus ParseCommandLine(int argc, char** argv, const std::vector<ToolFlag>& flags,
                             std::string* error);

// `bazel run` starts a tool in its runfiles directory: a relative `path` the user gave is
// taken relative to where they ran Bazel ($BUILD_WORKING_DIRECTORY), when that is set. Absolute
// and empty paths are returned as they are.
std::string ResolveUserPath(const std::string& path);

}  // namespace executorch_trt::examples
