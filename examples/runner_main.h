// Copyright (c) executorch-trt authors.
//
// runner_main.h: the main() of the runners (kv_cache_decode_check, cross_attn_decode_check):
// the command line (runner_flags.h), the program and reference checked for being usable,
// the three checks (runner_checks.h), the report (runner_report.h) and the exit status.

#pragma once

namespace executorch_trt::examples {

// What distinguishes one runner from the other.
struct RunnerSpec {
  const char* name;  // the binary's name, the prefix of its messages
  // The --help text up to the shared flags (runner_flags.h's kSharedFlagsUsage follows it;
  // both are printed after a usage error too).
  const char* usage;
  // An encoder-decoder program (methods encode, prefill, decode; a reference in the
  // cross_attn_decode_reference format) rather than a decoder-only one (prefill, decode;
  // kv_cache_decode_reference).
  bool encoder_decoder;
};

// Runs the runner: parses argv, checks --model against --reference, prints each method's
// delegates and their engine (plan_delegates.h), progress, the table and PASS or FAIL, each
// followed by the engines that ran, e.g. "PASS (engine: portable, CPU)". Returns the exit
// status: kExitPass, kExitFail (a check failed) or kExitUsage (bad usage, or an unreadable or
// invalid model or reference, including a reference of the other runner's format). Never
// throws.
int RunnerMain(int argc, char** argv, const RunnerSpec& spec);

}  // namespace executorch_trt::examples
