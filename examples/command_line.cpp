// Copyright (c) executorch-trt authors.

#include "examples/command_line.h"

#include <algorithm>
#include <cstdlib>

#include <absl/flags/commandlineflag.h>
#include <absl/flags/reflection.h>

namespace executorch_trt::examples {
namespace {

// The tool flag `arg` ("--max-seq-len") names, or nullptr. Abseil's names use underscores; the
// command line spells them with dashes only.
const ToolFlag* FindToolFlag(const std::string& arg, const std::vector<ToolFlag>& flags) {
  std::string name = arg.substr(2);
  if (name.find('_') != std::string::npos) {
    return nullptr;
  }
  std::replace(name.begin(), name.end(), '-', '_');
  const auto it = std::find_if(flags.begin(), flags.end(),
                               [&](const ToolFlag& flag) { return flag.name == name; });
  return it == flags.end() ? nullptr : &*it;
}

// Sets `flag` (given as `arg`) to `value` through Abseil; false with *error naming the flag.
bool SetFlag(const ToolFlag& flag, const std::string& arg, const std::string& value,
             std::string* error) {
  absl::CommandLineFlag* handle = absl::FindCommandLineFlag(flag.name);
  std::string abseil_error;
  if (handle != nullptr && handle->ParseFrom(value, &abseil_error) &&
      (!flag.valid || flag.valid())) {
    return true;
  }
  *error = flag.expected.empty() ? arg + ": " + abseil_error
                                 : arg + " must be " + flag.expected + ", got '" + value + "'";
  return false;
}

}  // namespace

ParseStatus ParseCommandLine(int argc, char** argv, const std::vector<ToolFlag>& flags,
                             std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      return ParseStatus::kHelp;
    }
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + arg + "' (flags are --name VALUE or --name=VALUE)";
      return ParseStatus::kUsage;
    }
    std::string value;
    const size_t eq = arg.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const ToolFlag* flag = FindToolFlag(arg, flags);
    if (flag == nullptr) {
      *error = "unknown flag " + arg;
      return ParseStatus::kUsage;
    }
    if (flag->is_bool) {
      if (has_value) {
        *error = arg + " takes no value";
        return ParseStatus::kUsage;
      }
      value = "true";
    } else if (!has_value) {
      if (i + 1 >= argc) {
        *error = "flag " + arg + " needs a value";
        return ParseStatus::kUsage;
      }
      value = argv[++i];
    }
    if (!SetFlag(*flag, arg, value, error)) {
      return ParseStatus::kUsage;
    }
  }
  return ParseStatus::kRun;
}

std::string ResolveUserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr) {
    return path;
  }
  return std::string(cwd) + "/" + path;
}

}  // namespace executorch_trt::examples
