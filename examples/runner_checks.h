// Copyright (c) executorch-trt authors.
//
// runner_checks.h: the runners' checks of a prefill/decode program against its
// eager-PyTorch reference (examples/reference.h): kv_cache_decode_check's (a decoder-only
// program, one conversation) and cross_attn_decode_check's (an encoder-decoder program with
// an `encode` method and cross-attention caches, several utterances). Each loads the program
// afresh with PrefillDecodeProgram (extension/program/prefill_decode_program.h) and returns an
// Outcome; none throws or exits. Progress lines go to stdout unless flags.quiet.

#pragma once

#include <string>
#include <utility>
#include <vector>

#include "examples/plan_copies.h"
#include "examples/reference.h"
#include "examples/runner_flags.h"
#include "examples/runner_report.h"

namespace executorch_trt::examples {

// The result of a check: pass, a failed check (exit 1), or an input the check cannot use
// (exit 2: the program does not load or does not match the reference). `message` says
// what and where.
struct Outcome {
  int exit_code = kExitPass;
  std::string message;

  static Outcome Pass() { return {}; }
  static Outcome Fail(std::string m) { return {kExitFail, std::move(m)}; }
  static Outcome Invalid(std::string m) { return {kExitUsage, std::move(m)}; }
  bool ok() const { return exit_code == kExitPass; }
};

// Check 1, run: a fresh load starts from the known state (every cache all zeros, and each
// cache one storage shared by prefill and decode). Then each utterance of the reference in
// turn on that load (a decoder-only reference has one): for an encoder-decoder program the
// runner first zeroes the cross-attention caches (from the second utterance on: starting an
// utterance is the caller's act) and runs encode (its output within flags.tol of the
// reference's); then prefill, then `steps` greedy decode steps, each against the reference:
// the token, the last-position logits within flags.tol, every cache's checksum within
// flags.checksum_tol, every cache's storage unmoved by execute; no state copied (the
// delegate's copy counter plus `plan_copies`' write-backs of the method) unless
// flags.allow_state_copies; and every cross-attention cache written exactly once per
// utterance: by step 0 (update_cross_attn_cache's counter), its contents and storage the same
// after every later step. `steps` applies to the last utterance; earlier ones run all of the
// reference's steps (the next utterance starts from their self caches, which are not zeroed).
// Appends a row per step executed to *rows.
Outcome CheckRun(const Flags& flags, const Reference& ref, int steps,
                 const ProgramCopies& plan_copies, std::vector<StepRow>* rows);

// Check 2, reload: a second fresh load reproduces step 0 of the first utterance as the
// reference says.
Outcome CheckReload(const Flags& flags, const Reference& ref);

// Check 3, sessions: flags.sessions conversations with different prompts (and, for an
// encoder-decoder program, features) on one loaded program, each with its own cache memory
// bound by name before every execute (and its cross caches zeroed by the runner at the start
// of each utterance), give exactly the same tokens and logits interleaved step by step as
// alone; conversation 0 (the reference's prompt and features) gives the reference's tokens.
Outcome CheckSessions(const Flags& flags, const Reference& ref, int steps);

// Check 4, prompts (a decoder-only reference with "prompts"): on one fresh load, each further
// prompt of the reference, of its own length, as a new conversation with zeroed cache memory
// of its own bound by name: prefill, then its decode steps, each checked as in check 1 (token,
// logits, cache checksums, storage unmoved, no state copied). A prefill exported with a
// dynamic length (torch.export.Dim) takes them all; a static one fails at the first prompt of
// another length, saying so.
Outcome CheckPrompts(const Flags& flags, const Reference& ref, const ProgramCopies& plan_copies);

}  // namespace executorch_trt::examples
