// Copyright (c) executorch-trt authors.

#include "examples/runner_flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>

namespace executorch_trt::examples {
namespace {

constexpr int kMaxSessions = 64;
constexpr double kMaxSteps = 1e6;

bool ParseNumber(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) {
    return false;
  }
  *out = v;
  return true;
}

bool IsValueFlag(const std::string& arg) {
  static const char* const kValueFlags[] = {
      "--model", "--reference", "--default-model", "--default-reference",
      "--steps", "--sessions",  "--tol",           "--checksum-tol",
      "--data",
  };
  return std::find_if(std::begin(kValueFlags), std::end(kValueFlags),
                      [&](const char* k) { return arg == k; }) != std::end(kValueFlags);
}

// Sets the flag `arg` (one IsValueFlag accepts) to `value`; false with *error if `value` is
// out of range.
bool SetValueFlag(const std::string& arg, const std::string& value, Flags* flags,
                  std::string* error) {
  double number = 0;
  if (arg == "--model") {
    flags->model = value;
  } else if (arg == "--reference") {
    flags->reference = value;
  } else if (arg == "--data") {
    if (value.empty()) {
      *error = "--data needs the path of a .ptd file";
      return false;
    }
    flags->data = value;
  } else if (arg == "--default-model") {
    flags->default_model = value;
  } else if (arg == "--default-reference") {
    flags->default_reference = value;
  } else if (arg == "--steps" || arg == "--sessions") {
    const double limit = arg == "--steps" ? kMaxSteps : kMaxSessions;
    if (!ParseNumber(value, &number) || number < 0 || number != std::floor(number) ||
        number > limit) {
      *error = arg + " must be an integer in [0, " + std::to_string(static_cast<long>(limit)) +
               "], got '" + value + "'";
      return false;
    }
    (arg == "--steps" ? flags->steps : flags->sessions) = static_cast<int>(number);
  } else {  // --tol, --checksum-tol
    if (!ParseNumber(value, &number) || number <= 0) {
      *error = arg + " must be a positive number, got '" + value + "'";
      return false;
    }
    (arg == "--tol" ? flags->tol : flags->checksum_tol) = number;
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

}  // namespace

ParseStatus ParseFlags(int argc, char** argv, Flags* flags, std::string* error) {
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
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "--quiet" || arg == "--allow-state-copies") {
      if (has_value) {
        *error = arg + " takes no value";
        return ParseStatus::kUsage;
      }
      (arg == "--quiet" ? flags->quiet : flags->allow_state_copies) = true;
      continue;
    }
    if (!IsValueFlag(arg)) {
      *error = "unknown flag " + arg;
      return ParseStatus::kUsage;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = "flag " + arg + " needs a value";
        return ParseStatus::kUsage;
      }
      value = argv[++i];
    }
    if (!SetValueFlag(arg, value, flags, error)) {
      return ParseStatus::kUsage;
    }
  }
  if (flags->model.empty() != flags->reference.empty()) {
    *error = "give --model and --reference together (a program and the reference written for it)";
    return ParseStatus::kUsage;
  }
  if (flags->model.empty()) {
    flags->model = flags->default_model;
    flags->reference = flags->default_reference;
  } else {
    flags->user_paths = true;
  }
  if (flags->model.empty() || flags->reference.empty()) {
    *error = "--model and --reference are required";
    return ParseStatus::kUsage;
  }
  return ParseStatus::kRun;
}

void ResolveUserPaths(Flags* flags) {
  if (flags->user_paths) {
    flags->model = ResolveUserPath(flags->model);
    flags->reference = ResolveUserPath(flags->reference);
  }
  if (!flags->data.empty()) {
    flags->data = ResolveUserPath(flags->data);
  }
}

}  // namespace executorch_trt::examples
