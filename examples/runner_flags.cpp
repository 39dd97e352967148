// Copyright (c) executorch-trt authors.

#include "examples/runner_flags.h"

#include <cmath>
#include <vector>

#include <absl/flags/flag.h>

ABSL_FLAG(std::string, model, "", "the program (.pte), relative to where you ran Bazel");
ABSL_FLAG(std::string, reference, "", "its eager-PyTorch reference (JSON)");
ABSL_FLAG(std::string, data, "", "the program's external data file (.ptd)");
ABSL_FLAG(std::string, default_model, "", "the Bazel target's program (runfiles-relative)");
ABSL_FLAG(std::string, default_reference, "", "the Bazel target's reference");
ABSL_FLAG(int, steps, -1, "decode steps to check (-1: all in the reference)");
ABSL_FLAG(int, sessions, 2, "interleaved conversations for the sessions check");
ABSL_FLAG(double, tol, 1e-4, "logits: max|diff| <= tol * max(1, max|ref|)");
ABSL_FLAG(double, checksum_tol, 1e-4, "cache checksums: |diff| <= tol * max(1, sum|cache|)");
ABSL_FLAG(bool, quiet, false, "no per-step progress lines");
ABSL_FLAG(bool, allow_state_copies, false, "report state bytes copied, do not fail on them");

namespace executorch_trt::examples {
namespace {

constexpr int kMaxSessions = 64;
constexpr int kMaxSteps = 1000000;

std::function<bool(const int&)> AtMost(int max) {
  return [max](const int& v) { return v >= 0 && v <= max; };
}

bool Positive(const double& v) { return std::isfinite(v) && v > 0; }

}  // namespace

ParseStatus ParseFlags(int argc, char** argv, Flags* flags, std::string* error) {
  const std::string positive = "a positive number";
  const std::vector<ToolFlag> tool_flags = {
      MakeToolFlag(FLAGS_model),
      MakeToolFlag(FLAGS_reference),
      MakeToolFlag(FLAGS_data, "the path of a .ptd file",
                   [](const std::string& path) { return !path.empty(); }),
      MakeToolFlag(FLAGS_default_model),
      MakeToolFlag(FLAGS_default_reference),
      MakeToolFlag(FLAGS_steps, "an integer in [0, " + std::to_string(kMaxSteps) + "]",
                   AtMost(kMaxSteps)),
      MakeToolFlag(FLAGS_sessions, "an integer in [0, " + std::to_string(kMaxSessions) + "]",
                   AtMost(kMaxSessions)),
      MakeToolFlag(FLAGS_tol, positive, Positive),
      MakeToolFlag(FLAGS_checksum_tol, positive, Positive),
      MakeToolFlag(FLAGS_quiet),
      MakeToolFlag(FLAGS_allow_state_copies),
  };
  const ParseStatus status = ParseCommandLine(argc, argv, tool_flags, error);
  if (status != ParseStatus::kRun) {
    return status;
  }
  flags->model = absl::GetFlag(FLAGS_model);
  flags->reference = absl::GetFlag(FLAGS_reference);
  flags->data = absl::GetFlag(FLAGS_data);
  flags->default_model = absl::GetFlag(FLAGS_default_model);
  flags->default_reference = absl::GetFlag(FLAGS_default_reference);
  flags->steps = absl::GetFlag(FLAGS_steps);
  flags->sessions = absl::GetFlag(FLAGS_sessions);
  flags->tol = absl::GetFlag(FLAGS_tol);
  flags->checksum_tol = absl::GetFlag(FLAGS_checksum_tol);
  flags->quiet = absl::GetFlag(FLAGS_quiet);
  flags->allow_state_copies = absl::GetFlag(FLAGS_allow_state_copies);
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
