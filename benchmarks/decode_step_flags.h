// Copyright (c) executorch-trt authors.
//
// decode_step_flags.h: the command line of decode_step_cpp (the C++ timing of one decode
// step; decode_step_cpp.cpp) and its exit status.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "extension/program/prefill_decode_program.h"

namespace executorch_trt::benchmarks {

// Exit status: measured (and written); the program failed to run (load, bind, fill or a
// step); bad usage or an unreadable/invalid input file.
constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

struct DecodeStepFlags {
  std::string model;  // the .pte (methods prefill and decode); required
  // Every KV cache of the program: name and float32 element count; bound to memory this
  // process owns. Required (decode.py passes the model's cache buffers).
  std::vector<extension::CacheBuffer> caches;
  std::vector<int64_t> prompt;  // prefill token ids; its length T is the exported prefill length
  int64_t token = 1;            // the decode step's token id
  int64_t max_seq_len = 0;      // cache capacity in positions; required
  int64_t warmup = 5;           // untimed decode steps before timing
  int64_t repeats = 100;        // timed decode steps
  int64_t threads = 0;          // ExecuTorch's CPU thread pool size; 0 = leave its default
  std::string json;             // where to write the JSON result; empty = stdout only
};

enum class FlagStatus {
  kRun,    // *flags is complete and consistent
  kHelp,   // --help or -h: print the usage and exit kExitOk
  kUsage,  // bad usage: *error names the flag and the problem (exit kExitUsage)
};

// Parses argv[1, argc) (`--name VALUE` or `--name=VALUE`) into *flags and checks them
// against each other (the decode position, T, must lie inside the cache: T < max_seq_len).
// Relative --model and --json paths are taken relative to $BUILD_WORKING_DIRECTORY when it
// is set (`bazel run`). Never exits; never throws.
FlagStatus ParseDecodeStepFlags(int argc, char** argv, DecodeStepFlags* flags, std::string* error);

}  // namespace executorch_trt::benchmarks
