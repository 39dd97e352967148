// Copyright (c) executorch-trt authors.
//
// runner_flags.h: the runners' command line (kv_cache_decode_check, cross_attn_decode_check
// take the same flags): its flags and exit status. Each runner has its own --help text.

#pragma once

#include <string>

namespace executorch_trt::examples {

// Exit status: every check passed; a check failed; bad usage or unreadable/invalid input.
constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

struct Flags {
  std::string model;  // as given on the command line (relative to the user's directory)
  std::string reference;
  std::string data;  // --data: the program's external data file (.ptd); empty: none
  // Set by the Bazel target (runfiles-relative): used only when neither --model nor
  // --reference is given, so a user's paths are never mixed with the built-in pair.
  std::string default_model;
  std::string default_reference;
  int steps = -1;  // decode steps to check; -1: all in the reference
  double tol = 1e-4;
  double checksum_tol = 1e-4;
  int sessions = 2;
  bool quiet = false;
  bool allow_state_copies = false;  // report copies of state, do not fail on them
  bool user_paths = false;          // --model/--reference came from the command line
};

enum class ParseStatus {
  kRun,    // *flags is complete: run the checks
  kHelp,   // --help or -h: print kUsage and exit kExitPass
  kUsage,  // bad usage: *error says what (exit kExitUsage)
};

// Parses argv[1, argc) into *flags: `--name VALUE` or `--name=VALUE`. Without --model and
// --reference, takes --default-model and --default-reference. Never exits; never throws.
ParseStatus ParseFlags(int argc, char** argv, Flags* flags, std::string* error);

// `bazel run` starts the binary in its runfiles directory: makes --model and --reference,
// when the user gave them, relative to where they ran Bazel (BUILD_WORKING_DIRECTORY). The
// target's defaults are runfiles-relative and stay as they are.
void ResolveUserPaths(Flags* flags);

}  // namespace executorch_trt::examples
