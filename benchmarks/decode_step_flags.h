// Copyright (c) executorch-trt authors.
//
// decode_step_flags.h: the command line of decode_step_cpp (the C++ timing of one decode
// step; decode_step_cpp.cpp; Abseil flags read by examples/command_line.h) and its exit status.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/command_line.h"
#include "extension/program/prefill_decode_program.h"

namespace executorch_trt::benchmarks {

using examples::kExitUsage;
using examples::ParseStatus;

// Exit status: measured (and written); the program failed to run (load, bind, fill or a
// step); bad usage or an unreadable/invalid input file (kExitUsage).
constexpr int kExitOk = 0;
constexpr int kExitFail = 1;

// The flags of the same names (defaults: decode_step_flags.cpp).
struct DecodeStepFlags {
  std::string model;  // the .pte (methods prefill and decode); required
  // Every KV cache of the program: name and float32 element count; bound to memory this
  // process owns. Required (decode.py passes the model's cache buffers).
  std::vector<extension::CacheBuffer> caches;
  std::vector<int64_t> prompt;  // prefill token ids; its length T is the exported prefill length
  int64_t token = 0;            // the decode step's token id
  int64_t max_seq_len = 0;      // cache capacity in positions; required
  int64_t warmup = 0;           // untimed decode steps before timing
  int64_t repeats = 0;          // timed decode steps
  int64_t threads = 0;          // ExecuTorch's CPU thread pool size; 0 = leave its default
  std::string json;             // where to write the JSON result; empty = stdout only
};

// Parses argv[1, argc) (examples::ParseCommandLine: `--name VALUE` or `--name=VALUE`) into
// *flags and checks them against each other: --model, --caches, --prompt and --max-seq-len
// are required, and the decode position, T, must lie inside the cache (T < max_seq_len).
// Relative --model and --json paths are taken relative to $BUILD_WORKING_DIRECTORY when it
// is set (`bazel run`). Never exits; never throws. Call once per process.
ParseStatus ParseDecodeStepFlags(int argc, char** argv, DecodeStepFlags* flags, std::string* error);

}  // namespace executorch_trt::benchmarks
