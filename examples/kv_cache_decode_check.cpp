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
// The pieces: runner_main.h (the main, shared with cross_attn_decode_check), runner_flags.h
// (the command line), extension/program/prefill_decode_program.h (loading the program and
// binding caller-owned caches: the library an application links), runner_checks.h (the checks),
// runner_report.h (what is printed), plan_delegates.h (each method's delegates and the engine
// each runs on, read from the program: the header and the closing line name them).

#include "examples/runner_main.h"

namespace executorch_trt::examples {
namespace {

constexpr char kUsage[] =
    "usage: kv_cache_decode_check --model PROGRAM.pte --reference REFERENCE.json\n"
    "                             [--steps N] [--tol T] [--checksum-tol C] [--sessions K]\n"
    "                             [--data PROGRAM.ptd] [--allow-state-copies] [--quiet]\n"
    "\n"
    "Runs the program's `prefill` and `decode` methods (ExecuTorch Program and Method, shared\n"
    "memory arenas, the TensorRTBackend delegate linked in) and checks tokens, logits and the\n"
    "KV cache itself against the eager reference after every step; then a fresh reload; then\n"
    "K interleaved conversations, each with its own cache memory bound by buffer name.\n"
    "Each delegate runs on the engine its blob names (portable: a nested ExecuTorch program\n"
    "on the CPU; tensorrt: a TensorRT plan on the GPU): the header lists each method's\n"
    "delegates and engines, read from the program, and PASS / FAIL the engines that ran.\n"
    "Every step must copy no state: \"state bytes copied\" is the delegate's own copies plus\n"
    "ExecuTorch's write-backs of mutable buffers (aten::copy_ / et_copy_index in the method's\n"
    "execution plan, bytes per call); any of either fails the check, naming the method and\n"
    "the buffers.\n"
    "\n"
    "  --model PATH         .pte written by examples/export_kv_cache_decode.py (or your own:\n"
    "                       methods prefill/decode, see README), relative to where you ran\n"
    "                       Bazel; give --model and --reference together. Without them the\n"
    "                       Bazel target checks its built-in example program.\n"
    "  --reference PATH     its JSON reference (eager PyTorch, same weights)\n"
    "  --steps N            decode steps to check (default: all in the reference)\n"
    "  --tol T              logits: max|diff| <= T * max(1, max|ref|) (default 1e-4)\n"
    "  --allow-state-copies report state bytes copied but do not fail on them: checks a\n"
    "                       program that legitimately copies its state back (e.g. exported\n"
    "                       with kv_cache=\"copy_back\") for correctness only\n";

}  // namespace
}  // namespace executorch_trt::examples

int main(int argc, char** argv) {
  return executorch_trt::examples::RunnerMain(
      argc, argv, {"kv_cache_decode_check", executorch_trt::examples::kUsage, false});
}
