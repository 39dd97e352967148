// Copyright (c) executorch-trt authors.
//
// runner_flags.h: the runners' command line (kv_cache_decode_check, cross_attn_decode_check
// take the same flags, Abseil flags read by command_line.h): its flags and exit status. Each
// runner has its own --help text.

#pragma once

#include <string>

#include "examples/command_line.h"

namespace executorch_trt::examples {

// Exit status: every check passed; a check failed; bad usage or unreadable/invalid input
// (kExitUsage, command_line.h).
constexpr int kExitPass = 0;
constexpr int kExitFail = 1;

struct Flags {
  std::string model;  // as given on the command line (relative to the user's directory)
  std::string reference;
  std::string data;  // --data: the program's external data file (.ptd); empty: none
  // Set by the Bazel target (runfiles-relative): used only when neither --model nor
  // --reference is given, so a user's paths are never mixed with the built-in pair.
  std::string default_model;
  std::string default_reference;
  // The rest as the flags of the same names give them (defaults: runner_flags.cpp).
  int steps = -1;  // decode steps to check; -1: all in the reference
  double tol = 0;
  double checksum_tol = 0;
  int sessions = 0;
  bool quiet = false;
  bool allow_state_copies = false;  // report copies of state, do not fail on them
  bool user_paths = false;          // --model/--reference came from the command line
};

// The --help text of the flags both runners describe alike, and the exit status: each runner's
// usage (its synopsis, what it does and its own flags) ends with it.
inline constexpr char kSharedFlagsUsage[] =
    "  --data PATH          the program's external data file (.ptd), for a program exported\n"
    "                       with external_weights=True (relative to where you ran Bazel,\n"
    "                       or to the current directory when run directly)\n"
    "  --checksum-tol C     cache checksums: |diff| <= C * max(1, sum|cache|) (default 1e-4)\n"
    "  --sessions K         interleaved conversations for the sessions check (default 2;\n"
    "                       0 skips it; at most 64)\n"
    "  --quiet              no per-step progress lines\n"
    "\n"
    "Exit status: 0 PASS, 1 a check failed, 2 bad usage or unreadable/invalid input.\n";

// Parses argv[1, argc) into *flags (ParseCommandLine: `--name VALUE` or `--name=VALUE`). Without
// --model and --reference, takes --default-model and --default-reference; kUsage with *error
// when only one of --model and --reference is given, or neither they nor the defaults. Never
// exits; never throws. Call once per process.
ParseStatus ParseFlags(int argc, char** argv, Flags* flags, std::string* error);

// `bazel run` starts the binary in its runfiles directory: makes --model and --reference,
// when the user gave them, and --data relative to where they ran Bazel
// (BUILD_WORKING_DIRECTORY). The target's defaults are runfiles-relative and stay as they are.
void ResolveUserPaths(Flags* flags);

}  // namespace executorch_trt::examples
