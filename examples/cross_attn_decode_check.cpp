// Copyright (c) executorch-trt authors.
//
// cross_attn_decode_check: proves, outside Python, that a delegated encoder-decoder program
// (encode, prefill, decode) computes each cross-attention cache once per utterance under
// torch.cond and reuses it, keeps its self- and cross-attention caches caller-owned and
// updated in place across steps and methods, starts a new utterance when the caller zeroes
// the cross caches, and keeps conversations apart.
//
// usage: cross_attn_decode_check --model M.pte --reference R.json [--steps N] [--tol T]
//                                [--checksum-tol C] [--sessions K] [--allow-state-copies]
//                                [--quiet]
//
// Checks, each against the eager-PyTorch reference written by export_cross_attn_decode.py
// (two utterances, examples/reference.h):
//   1. run:       a fresh load starts from the known state (every cache all zeros, each shared
//                 by prefill and decode); then each utterance in turn on that load: the runner
//                 zeroes the cross caches (from the second utterance on; the storage it found
//                 by name), encode (output within --tol), prefill and N greedy decode steps:
//                 every token equal, last-position logits within --tol, every cache's (self
//                 and cross) checksum within --checksum-tol after every step, every cache's
//                 storage unmoved by execute; every cross cache written exactly once per
//                 utterance: step 0 runs update_cross_attn_cache once per cross cache (its
//                 kernel's counter, core/kernels/cross_attn_cache.h), a decode step runs it
//                 never, and after step 0 each cross cache keeps its contents (bit for bit)
//                 and its storage; and no step copies state (as kv_cache_decode_check).
//   2. reload:    a second, fresh load reproduces utterance 0's step 0.
//   3. sessions:  K conversations, each with its own cache memory owned by this program and
//                 bound by buffer name before every execute (its cross caches zeroed by the
//                 runner at the start of each utterance), interleaved step by step, give
//                 exactly what each gives alone; conversation 0 matches the reference.
// Exit: 0 all checks passed; 1 a check failed ("FAIL: <what>, at <where>"); 2 bad usage or
// an unreadable/invalid model or reference (a message naming the file and the problem).
//
// The pieces are kv_cache_decode_check's (runner_main.h, runner_flags.h,
// extension/program/prefill_decode_program.h, runner_checks.h, runner_report.h): the
// reference's format makes the checks encoder-decoder ones.

#include "examples/runner_main.h"

namespace executorch_trt::examples {
namespace {

constexpr char kUsage[] =
    "usage: cross_attn_decode_check --model PROGRAM.pte --reference REFERENCE.json\n"
    "                               [--steps N] [--tol T] [--checksum-tol C] [--sessions K]\n"
    "                               [--data PROGRAM.ptd] [--allow-state-copies] [--quiet]\n"
    "\n"
    "Runs an encoder-decoder program's `encode`, `prefill` and `decode` methods (ExecuTorch\n"
    "Program and Method, shared memory arenas, the TensorRTBackend delegate linked in) for each\n"
    "utterance of the reference, zeroing the cross-attention caches between utterances, and\n"
    "checks tokens, logits, the encoder output and every cache (self- and cross-attention)\n"
    "against the eager reference after every step; that each cross cache is written once per\n"
    "utterance (by its first call; decode steps leave it as it is, where it is); then a fresh\n"
    "reload; then K interleaved conversations, each with its own cache memory bound by buffer\n"
    "name. Every step must copy no state (the delegate's own copies plus ExecuTorch's\n"
    "write-backs of mutable buffers, from the execution plan). The header lists each method's\n"
    "delegates and the engine each runs on (read from the program), PASS / FAIL the engines\n"
    "that ran.\n"
    "\n"
    "  --model PATH         .pte written by examples/export_cross_attn_decode.py (or your own:\n"
    "                       methods encode/prefill/decode, see README), relative to where you\n"
    "                       ran Bazel; give --model and --reference together. Without them\n"
    "                       the Bazel target checks its built-in example program.\n"
    "  --reference PATH     its JSON reference (eager PyTorch, same weights, two utterances)\n"
    "  --steps N            decode steps of the last utterance in the run check, of each\n"
    "                       in the sessions check (default: all in the reference)\n"
    "  --tol T              logits and encoder output: max|diff| <= T * max(1, max|ref|)\n"
    "                       (default 1e-4)\n"
    "  --allow-state-copies report state bytes copied but do not fail on them (correctness\n"
    "                       only)\n";

}  // namespace
}  // namespace executorch_trt::examples

int main(int argc, char** argv) {
  return executorch_trt::examples::RunnerMain(
      argc, argv, {"cross_attn_decode_check", executorch_trt::examples::kUsage, true});
}
