// Copyright (c) executorch-trt authors.
//
// kv_cache_decode_check: proves, outside Python, that a delegated prefill/decode program
// keeps its caller-owned KV cache across decode steps, shares it between prefill and
// decode, and keeps conversations apart.
//
// usage: kv_cache_decode_check --model M.pte --reference R.json [--steps N] [--tol T]
//                              [--checksum-tol C] [--sessions K] [--allow-state-copies]
//                              [--quiet]
//
// Checks, each against the eager-PyTorch reference written by export_kv_cache_decode.py:
//   1. run:       a fresh load starts from the known state (every cache all zeros); prefill
//                 then N greedy decode steps: every token equal, last-position logits within
//                 --tol (max |Δ| <= tol * max(1, max |ref|)), every cache's checksum within
//                 --checksum-tol after every step, and each cache's storage (data pointer)
//                 the same before and after every execute and shared by both methods; and
//                 no step copies state: 0 "state bytes copied" = the bytes the delegate
//                 copied (its counter, core/binding/copy_counter.h) + the bytes ExecuTorch
//                 writes back into mutable buffers per call of the method (`aten::copy_` and
//                 `et_copy_index` in its execution plan, examples/plan_copies.h).
//                 --allow-state-copies reports those bytes but does not fail on them (for
//                 programs exported with kv_cache="copy_back").
//   2. reload:    a second, fresh load of the same file reproduces step 0 (loads are
//                 isolated and start from the known state).
//   3. sessions:  K conversations with different prompts, each with its own cache memory
//                 owned by this program and bound by buffer name before every execute,
//                 interleaved step by step, give exactly the tokens and logits each gives
//                 when run alone; conversation 0 (the reference prompt) also matches the
//                 reference.
// Exit: 0 all checks passed; 1 a check failed ("FAIL: <what>, at <where>"); 2 bad usage or
// an unreadable/invalid model or reference (a message naming the file and the problem).
//
// The pieces: runner_flags.h (the command line), prefill_decode_program.h (loading the
// program and binding caller-owned caches: the part to copy into an application),
// runner_checks.h (the three checks), runner_report.h (what is printed).

#include <cstdio>
#include <string>
#include <vector>

#include <executorch/runtime/platform/runtime.h>

#include "examples/plan_copies.h"
#include "examples/reference.h"
#include "examples/runner_checks.h"
#include "examples/runner_flags.h"
#include "examples/runner_report.h"

namespace executorch_trt::examples {
namespace {

bool IsReadableFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return false;
  }
  const bool is_file = std::fseek(f, 0, SEEK_END) == 0 && std::ftell(f) >= 0;
  std::fclose(f);
  return is_file;
}

// Prints "kv_cache_decode_check: <message>" to stderr; returns kExitUsage.
int Invalid(const std::string& message) {
  std::fprintf(stderr, "kv_cache_decode_check: %s\n", message.c_str());
  return kExitUsage;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave correctly with stderr
  Flags flags;
  std::string error;
  const ParseStatus parsed = ParseFlags(argc, argv, &flags, &error);
  if (parsed == ParseStatus::kHelp) {
    std::fputs(kUsage, stdout);
    return kExitPass;
  }
  if (parsed != ParseStatus::kRun) {
    std::fprintf(stderr, "kv_cache_decode_check: %s\n\n%s", error.c_str(), kUsage);
    return kExitUsage;
  }
  ResolveUserPaths(&flags);
  if (!IsReadableFile(flags.model)) {
    return Invalid(flags.model + ": no such file (or not readable)");
  }
  Reference ref;
  if (!LoadReference(flags.reference, &ref, &error)) {
    return Invalid(error);
  }
  const int available = static_cast<int>(ref.steps.size()) - 1;
  if (flags.steps > available) {
    return Invalid("--steps " + std::to_string(flags.steps) + " but " + flags.reference +
                   " has only " + std::to_string(available) + " decode steps");
  }
  const int steps = flags.steps < 0 ? available : flags.steps;
  auto plan_copies = ReadProgramCopies(flags.model, &error);
  if (!plan_copies.ok()) {
    return Invalid(error);
  }
  for (const char* method : {"prefill", "decode"}) {
    if (plan_copies->Find(method) == nullptr) {
      return Invalid(flags.model + ": the program has no method '" + method +
                     "' (it has: " + plan_copies->MethodNames() + ")");
    }
  }
  executorch::runtime::runtime_init();

  std::printf("kv_cache_decode_check: %s (prompt %zu tokens, %d decode steps, %zu caches)\n",
              flags.model.c_str(), ref.prompt.size(), steps, ref.caches.size());
  PrintWriteBacks(*plan_copies);
  std::vector<StepRow> rows;
  const char* check = "run";
  std::printf("[1/3] fresh load, prefill + %d decode steps vs reference\n", steps);
  Outcome outcome = CheckRun(flags, ref, steps, *plan_copies, &rows);
  if (outcome.ok()) {
    check = "reload";
    std::printf("[2/3] fresh reload starts from the known state\n");
    outcome = CheckReload(flags, ref);
  }
  if (outcome.ok() && flags.sessions > 0) {
    check = "sessions";
    std::printf("[3/3] %d interleaved sessions, each with its own cache memory\n", flags.sessions);
    outcome = CheckSessions(flags, ref, steps);
  }
  if (!rows.empty()) {
    PrintTable(rows, flags.allow_state_copies);
  }
  if (outcome.exit_code == kExitUsage) {
    return Invalid(outcome.message);
  }
  if (!outcome.ok()) {
    std::printf("FAIL: %s (check: %s)\n", outcome.message.c_str(), check);
    return kExitFail;
  }
  std::printf("PASS\n");
  return kExitPass;
}

}  // namespace
}  // namespace executorch_trt::examples

int main(int argc, char** argv) { return executorch_trt::examples::Main(argc, argv); }
