// Copyright (c) executorch-trt authors.

#include "examples/runner_main.h"

#include <cstdio>
#include <string>
#include <vector>

#include <executorch/runtime/platform/runtime.h>

#include "examples/plan_copies.h"
#include "examples/plan_delegates.h"
#include "examples/readable_file.h"
#include "examples/reference.h"
#include "examples/runner_checks.h"
#include "examples/runner_flags.h"
#include "examples/runner_report.h"

namespace executorch_trt::examples {
namespace {

// Prints "<runner>: <message>" to stderr; returns kExitUsage.
int Invalid(const RunnerSpec& spec, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", spec.name, message.c_str());
  return kExitUsage;
}

void PrintHeader(const RunnerSpec& spec, const Flags& flags, const Reference& ref, int steps) {
  if (!ref.encoder_decoder) {
    std::printf("%s: %s (prompt %zu tokens, %d decode steps, %zu caches)\n", spec.name,
                flags.model.c_str(), ref.prompt.size(), steps, ref.caches.size());
    return;
  }
  const size_t cross = ref.num_cross_caches();
  const std::string each = steps == ref.decode_steps() || ref.utterances.size() == 1
                               ? std::to_string(steps) + " decode steps each"
                               : std::to_string(steps) + " decode steps in the last (" +
                                     std::to_string(ref.decode_steps()) + " in the others)";
  std::printf("%s: %s (%zu utterances, prompt %zu tokens, %s, %zu caches: %zu self, %zu cross)\n",
              spec.name, flags.model.c_str(), ref.utterances.size(), ref.prompt.size(),
              each.c_str(), ref.caches.size(), ref.caches.size() - cross, cross);
}

}  // namespace

int RunnerMain(int argc, char** argv, const RunnerSpec& spec) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave correctly with stderr
  Flags flags;
  std::string error;
  const ParseStatus parsed = ParseFlags(argc, argv, &flags, &error);
  if (parsed == ParseStatus::kHelp) {
    std::printf("%s%s", spec.usage, kSharedFlagsUsage);
    return kExitPass;
  }
  if (parsed != ParseStatus::kRun) {
    std::fprintf(stderr, "%s: %s\n\n%s%s", spec.name, error.c_str(), spec.usage, kSharedFlagsUsage);
    return kExitUsage;
  }
  ResolveUserPaths(&flags);
  if (!IsReadableFile(flags.model)) {
    return Invalid(spec, flags.model + ": no such file (or not readable)");
  }
  Reference ref;
  if (!LoadReference(flags.reference, &ref, &error)) {
    return Invalid(spec, error);
  }
  if (ref.encoder_decoder != spec.encoder_decoder) {
    return Invalid(spec,
                   flags.reference + ": a reference for " +
                       (ref.encoder_decoder ? "an encoder-decoder" : "a decoder-only") +
                       " program; check it with " +
                       (ref.encoder_decoder ? "cross_attn_decode_check" : "kv_cache_decode_check"));
  }
  const int available = ref.decode_steps();
  if (flags.steps > available) {
    return Invalid(spec, "--steps " + std::to_string(flags.steps) + " but " + flags.reference +
                             " has only " + std::to_string(available) + " decode steps");
  }
  const int steps = flags.steps < 0 ? available : flags.steps;
  auto plan_copies = ReadProgramCopies(flags.model, &error);
  if (!plan_copies.ok()) {
    return Invalid(spec, error);
  }
  std::vector<std::string> methods = {"prefill", "decode"};
  if (spec.encoder_decoder) {
    methods.insert(methods.begin(), "encode");
  }
  for (const std::string& method : methods) {
    if (plan_copies->Find(method) == nullptr) {
      return Invalid(spec, flags.model + ": the program has no method '" + method +
                               "' (it has: " + plan_copies->MethodNames() + ")");
    }
  }
  executorch::runtime::runtime_init();
  // Read off the program, not assumed: the closing line says which engine ran.
  auto delegates = ReadProgramDelegates(flags.model, &error);
  if (!delegates.ok()) {
    return Invalid(spec, error);
  }
  const std::string engines = delegates->EnginesRun(methods);

  PrintHeader(spec, flags, ref, steps);
  PrintDelegates(*delegates, methods);
  PrintWriteBacks(*plan_copies, methods);
  std::vector<StepRow> rows;
  const char* check = "run";
  const int checks = ref.prompts.empty() ? 3 : 4;
  if (ref.encoder_decoder) {
    std::printf(
        "[1/%d] fresh load, %zu utterances (encode, prefill, decode) vs reference; cross caches "
        "written once per utterance\n",
        checks, ref.utterances.size());
  } else {
    std::printf("[1/%d] fresh load, prefill + %d decode steps vs reference\n", checks, steps);
  }
  Outcome outcome = CheckRun(flags, ref, steps, *plan_copies, &rows);
  if (outcome.ok()) {
    check = "reload";
    std::printf("[2/%d] fresh reload starts from the known state\n", checks);
    outcome = CheckReload(flags, ref);
  }
  if (outcome.ok() && flags.sessions > 0) {
    check = "sessions";
    std::printf("[3/%d] %d interleaved sessions, each with its own cache memory\n", checks,
                flags.sessions);
    outcome = CheckSessions(flags, ref, steps);
  }
  if (outcome.ok() && !ref.prompts.empty()) {
    check = "prompts";
    std::string lengths;
    for (const PromptRun& run : ref.prompts) {
      lengths += (lengths.empty() ? "" : ", ") + std::to_string(run.prompt.size());
    }
    std::printf("[4/4] prompts of %s tokens on one load, each with its own cache memory\n",
                lengths.c_str());
    outcome = CheckPrompts(flags, ref, *plan_copies);
  }
  if (!rows.empty()) {
    PrintTable(rows, flags.allow_state_copies);
    if (ref.encoder_decoder) {
      PrintCrossWrites(rows, ref.num_cross_caches());
    }
  }
  if (outcome.exit_code == kExitUsage) {
    return Invalid(spec, outcome.message);
  }
  if (!outcome.ok()) {
    std::printf("FAIL: %s (check: %s) (%s)\n", outcome.message.c_str(), check, engines.c_str());
    return kExitFail;
  }
  std::printf("PASS (%s)\n", engines.c_str());
  return kExitPass;
}

}  // namespace executorch_trt::examples
