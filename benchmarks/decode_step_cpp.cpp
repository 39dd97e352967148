// Copyright (c) executorch-trt authors.
//
// decode_step_cpp: times the delegate's decode step from C++ (ExecuTorch's Program and Method,
// the delegate linked in statically, no Python in the process), so that decode.py's numbers
// for the delegate do not depend on the Python runtime.
//
// usage: decode_step_cpp --model M.pte --caches NAME=NUMEL,... --prompt ID,ID,...
//                        --max-seq-len N [--token ID] [--warmup N] [--repeats N]
//                        [--threads N] [--json FILE]
//
// What it does, mirroring decode.py's timing worker (benchmarks/measure.py):
//   1. loads the program's prefill and decode methods into shared arenas
//      (extension/program/prefill_decode_program.h) and binds every KV cache to zeroed memory
//      this process owns (BindCaches): the delegate updates that memory in place;
//   2. fills every cache position: chunks of T = prompt-length positions covering
//      0 .. max_seq_len-1 (the last chunk ends at max_seq_len), then the prompt itself at
//      0 .. T-1 (measure.fill_positions). PrefillDecodeProgram runs prefill only at positions
//      0 .. T-1, so a chunk at another start is run as T decode steps, one token of the chunk
//      each at its position: attention is causal over cache positions, so each position's
//      keys and values are those the chunked prefill writes (up to float rounding);
//   3. runs --warmup untimed decode steps, then --repeats timed ones, all of --token at
//      position T (so every step does identical work), each timed with
//      std::chrono::steady_clock around one PrefillDecodeProgram::Decode call (set the two
//      inputs, Method::execute, copy the V logits out);
//   4. prints one summary line and the JSON result (to --json FILE if given, else to stdout):
//      {"model", "max_seq_len", "prompt_len", "position", "token", "threads", "warmup",
//       "repeats", "caches", "cache_nbytes", "fill_prefill_calls", "fill_decode_calls",
//       "fill_ms", "clock", "step_ms_median", "step_ms_p10", "step_ms_p90", "step_ms_samples",
//       "decode_delegates", "engine"}
//      (times in milliseconds; percentiles as decode.py's measure.summarize computes them;
//      "decode_delegates" the decode method's delegates and what runs each, "engine" the
//      engines of its TensorRTBackend delegates, e.g. "portable, CPU", both read from the
//      program: examples/plan_delegates.h). Before timing it prints the decode method's
//      delegates.
//
// Exit: 0 measured; 1 the program failed while running (binding, fill or a step; the
// message says which and where); 2 bad usage, an unreadable/invalid model, or a model the
// flags do not fit (a cache it does not have or of another size, a capacity it was not
// exported with, a prompt of another length than its prefill's, a token id outside its
// vocabulary, ...): a message naming the flag or the file.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/platform/runtime.h>
#include <nlohmann/json.hpp>

#include "benchmarks/decode_step_flags.h"
#include "benchmarks/step_stats.h"
#include "examples/plan_delegates.h"
#include "examples/readable_file.h"
#include "extension/program/prefill_decode_program.h"

// libexecutorch_threadpool.so's CPU thread pool (XNNPACK and the optimized kernels run on
// it). The wheel's SDK ships the library but not its header (extension/threadpool/
// threadpool.h); these are the two member functions used here, as that header declares them
// (ExecuTorch 1.5.1), called through the pointer get_threadpool() returns. The same pool
// decode.py's workers resize with portable_lib._unsafe_reset_threadpool.
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool

namespace executorch_trt::benchmarks {
namespace {

using executorch::runtime::Error;
using extension::CacheBuffer;
using extension::Phase;
using extension::PrefillDecodeProgram;

constexpr char kName[] = "decode_step_cpp";

constexpr char kUsage[] =
    "usage: decode_step_cpp --model PROGRAM.pte --caches NAME=NUMEL,... --prompt ID,ID,...\n"
    "                       --max-seq-len N [--token ID] [--warmup N] [--repeats N]\n"
    "                       [--threads N] [--json FILE]\n"
    "\n"
    "Times one decode step of a prefill/decode program from C++: loads both methods into\n"
    "shared arenas, binds every KV cache to memory it owns, fills every cache position\n"
    "(chunks of the prompt's length, then the prompt at 0..T-1), runs warm-up steps, then\n"
    "times decode steps at position T (the prompt length) with std::chrono::steady_clock.\n"
    "decode.py (//benchmarks:decode) runs it for the delegate's in-place variant.\n"
    "\n"
    "  --model PATH       .pte with methods prefill(input_ids [1, T], cache_position [T]) and\n"
    "                     decode(input_ids [1, 1], cache_position [1]) sharing their caches\n"
    "                     (relative paths: to where you ran Bazel)\n"
    "  --caches LIST      every KV cache as NAME=NUMEL (float32 elements), comma-separated\n"
    "  --prompt IDS       prefill token ids, comma-separated; T = their count (the exported\n"
    "                     prefill length)\n"
    "  --max-seq-len N    cache capacity in positions (> T)\n"
    "  --token ID         the decode step's token id (default 1)\n"
    "  --warmup N         untimed decode steps first (default 5)\n"
    "  --repeats N        timed decode steps (default 100)\n"
    "  --threads N        ExecuTorch's CPU thread pool size (default 0: its own default)\n"
    "  --json FILE        write the JSON result to FILE instead of stdout\n"
    "\n"
    "Exit status: 0 measured, 1 a step failed, 2 bad usage or an unreadable/invalid model.\n";

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kName, message.c_str());
  return code;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Resizes ExecuTorch's CPU thread pool to `threads` (0: leaves it as created); returns the
// size in effect.
int64_t SetThreads(int64_t threads) {
  auto* pool = executorch::extension::threadpool::get_threadpool();
  if (threads > 0) {
    pool->_unsafe_reset_threadpool(static_cast<uint32_t>(threads));
  }
  return static_cast<int64_t>(pool->get_thread_count());
}

// Start positions of the fill chunks of `t` positions covering 0 .. capacity-1, the last
// ending at `capacity` (measure.fill_positions without the final prompt); t < capacity.
std::vector<int64_t> ChunkStarts(int64_t capacity, int64_t t) {
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + t <= capacity; s += t) {
    starts.push_back(s);
  }
  if (starts.back() + t < capacity) {
    starts.push_back(capacity - t);
  }
  return starts;
}

// An error naming the cache whose tensor has no dimension of `capacity` positions (the
// program was exported for another --max-seq-len), or "" when every cache has one.
std::string CapacityMismatch(const PrefillDecodeProgram& program,
                             const std::vector<CacheBuffer>& caches, int64_t capacity) {
  for (size_t i = 0; i < caches.size(); ++i) {
    const executorch::aten::Tensor& t = program.cache(Phase::kDecode, i);
    bool found = false;
    std::string shape;
    for (decltype(t.dim()) d = 0; d < t.dim(); ++d) {
      found = found || t.size(d) == capacity;
      shape += (d ? ", " : "") + std::to_string(t.size(d));
    }
    if (!found) {
      return "cache '" + caches[i].name + "' has shape [" + shape + "]: no dimension of " +
             std::to_string(capacity) + " positions; pass the --max-seq-len it was exported with";
    }
  }
  return "";
}

// An error saying how many tokens the program's prefill takes when its input_ids [1, T] do
// not hold `prompt_len` tokens, or "" when they do.
std::string PromptMismatch(const PrefillDecodeProgram& program, size_t prompt_len) {
  const executorch::runtime::MethodMeta meta = program.method_meta(Phase::kPrefill);
  auto ids =
      meta.num_inputs() > 0
          ? meta.input_tensor_meta(0)
          : executorch::runtime::Result<executorch::runtime::TensorInfo>(Error::InvalidProgram);
  if (!ids.ok() || ids->sizes().size() != 2) {
    return "prefill's first input is not input_ids [1, T]";
  }
  const int64_t t = ids->sizes()[1];
  if (t == static_cast<int64_t>(prompt_len)) {
    return "";
  }
  return "prefill takes " + std::to_string(t) + " tokens (input_ids [1, " + std::to_string(t) +
         "]); --prompt has " + std::to_string(prompt_len);
}

// An error naming the first token id (--prompt, then --token) outside the vocabulary (the V
// of decode's logits [1, 1, V]), or "" when every id is inside it (or V is not known).
std::string TokenMismatch(const PrefillDecodeProgram& program, const DecodeStepFlags& flags) {
  const executorch::runtime::MethodMeta meta = program.method_meta(Phase::kDecode);
  if (meta.num_outputs() == 0) {
    return "";
  }
  auto logits = meta.output_tensor_meta(0);
  if (!logits.ok() || logits->sizes().size() != 3) {
    return "";
  }
  const int64_t vocab = logits->sizes()[2];
  std::vector<int64_t> ids = flags.prompt;
  ids.push_back(flags.token);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab) {
      return std::string(i + 1 < ids.size() ? "--prompt" : "--token") + ": token id " +
             std::to_string(ids[i]) + " is outside the vocabulary of " + std::to_string(vocab) +
             " (decode's logits are [1, 1, " + std::to_string(vocab) + "])";
    }
  }
  return "";
}

// What the fill ran: prefill and decode calls and their wall time (ms).
struct FillStats {
  int64_t prefill_calls = 0;
  int64_t decode_calls = 0;
  double ms = 0;
};

// Step 2 of the file comment: fills every cache position, then prefills the prompt.
Error Fill(PrefillDecodeProgram* program, const DecodeStepFlags& flags, FillStats* stats,
           std::string* error) {
  const auto t = static_cast<int64_t>(flags.prompt.size());
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> logits;
  std::vector<int64_t> starts = ChunkStarts(flags.max_seq_len, t);
  starts.push_back(0);  // the prompt itself, last
  for (int64_t s : starts) {
    if (s == 0) {
      const Error err = program->Prefill(flags.prompt, &logits, error);
      ++stats->prefill_calls;
      if (err != Error::Ok) {
        *error = "fill: " + *error + " (prefill at positions 0.." + std::to_string(t - 1) + ")";
        return err;
      }
      continue;
    }
    for (int64_t i = 0; i < t; ++i) {
      const Error err = program->Decode(flags.prompt[i], s + i, &logits, error);
      ++stats->decode_calls;
      if (err != Error::Ok) {
        *error = "fill: " + *error + " (decode at position " + std::to_string(s + i) + ")";
        return err;
      }
    }
  }
  stats->ms = MsSince(start);
  return Error::Ok;
}

int Run(const DecodeStepFlags& flags) {
  if (!examples::IsReadableFile(flags.model)) {
    return Fail(kExitUsage, flags.model + ": no such file (or not readable)");
  }
  std::ofstream out;
  if (!flags.json.empty()) {  // checked before the minutes of fill and timing
    out.open(flags.json);
    if (!out) {
      return Fail(kExitUsage, "--json: cannot write " + flags.json);
    }
  }
  executorch::runtime::runtime_init();
  const int64_t threads = SetThreads(flags.threads);

  std::string error;
  // What runs the timed step, read off the program, so the numbers are never taken for
  // TensorRT's when the portable engine ran them on the CPU.
  auto delegates = examples::ReadProgramDelegates(flags.model, &error);
  if (!delegates.ok()) {
    return Fail(kExitUsage, error);
  }
  const examples::MethodDelegates* decode = delegates->Find("decode");
  const std::string decode_delegates =
      decode == nullptr ? "no method 'decode'" : decode->Describe();
  std::string engine;
  for (const std::string& label : delegates->EngineLabels({"decode"})) {
    engine += (engine.empty() ? "" : "; ") + label;
  }
  std::printf("%s: %s: decode: %s\n", kName, flags.model.c_str(), decode_delegates.c_str());
  auto loaded = PrefillDecodeProgram::Load(flags.model, flags.caches, &error);
  if (!loaded.ok()) {
    return Fail(kExitUsage, "cannot load the program: " + error);
  }
  PrefillDecodeProgram& program = *loaded.get();
  std::string mismatch = PromptMismatch(program, flags.prompt.size());
  if (mismatch.empty()) {
    mismatch = TokenMismatch(program, flags);
  }
  if (mismatch.empty()) {
    mismatch = CapacityMismatch(program, flags.caches, flags.max_seq_len);
  }
  if (!mismatch.empty()) {
    return Fail(kExitUsage, flags.model + ": " + mismatch);
  }

  // Step 1: caller-owned caches, zeroed (a fresh conversation).
  std::vector<std::vector<float>> memory;
  int64_t cache_nbytes = 0;
  for (const CacheBuffer& cache : flags.caches) {
    memory.emplace_back(static_cast<size_t>(cache.numel), 0.0f);
    cache_nbytes += cache.numel * static_cast<int64_t>(sizeof(float));
  }
  if (program.BindCaches(&memory, &error) != Error::Ok) {
    return Fail(kExitFail, error);
  }

  FillStats fill;
  if (Fill(&program, flags, &fill, &error) != Error::Ok) {
    return Fail(kExitFail, error);
  }

  // Step 3: warm-up, then timed steps, all at position T.
  const auto position = static_cast<int64_t>(flags.prompt.size());
  std::vector<float> logits;
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(flags.repeats));
  for (int64_t i = 0; i < flags.warmup + flags.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Error err = program.Decode(flags.token, position, &logits, &error);
    const double ms = MsSince(start);
    if (err != Error::Ok) {
      return Fail(kExitFail, error + " (" + (i < flags.warmup ? "warm-up" : "timed") +
                                 " decode step " + std::to_string(i) + " at position " +
                                 std::to_string(position) + ")");
    }
    if (i >= flags.warmup) {
      step_ms.push_back(ms);
    }
  }

  // Step 4.
  const StepSummary summary = Summarize(step_ms);
  nlohmann::ordered_json result = {
      {"model", flags.model},
      {"max_seq_len", flags.max_seq_len},
      {"prompt_len", position},
      {"position", position},
      {"token", flags.token},
      {"threads", threads},
      {"warmup", flags.warmup},
      {"repeats", flags.repeats},
      {"caches", flags.caches.size()},
      {"cache_nbytes", cache_nbytes},
      {"fill_prefill_calls", fill.prefill_calls},
      {"fill_decode_calls", fill.decode_calls},
      {"fill_ms", fill.ms},
      {"clock", "std::chrono::steady_clock, one PrefillDecodeProgram::Decode call per step"},
      {"step_ms_median", summary.median_ms},
      {"step_ms_p10", summary.p10_ms},
      {"step_ms_p90", summary.p90_ms},
      {"step_ms_samples", step_ms},
      {"decode_delegates", decode_delegates},
      {"engine", engine.empty() ? delegates->EnginesRun({"decode"}) : engine},
  };
  std::printf(
      "%s: %s: %lld decode steps at position %lld (max_seq_len %lld, %lld threads, %s): "
      "median %.3f ms, p10 %.3f ms, p90 %.3f ms (fill: %lld prefill + %lld decode calls, %.0f "
      "ms)\n",
      kName, flags.model.c_str(), static_cast<long long>(flags.repeats),
      static_cast<long long>(position), static_cast<long long>(flags.max_seq_len),
      static_cast<long long>(threads), delegates->EnginesRun({"decode"}).c_str(), summary.median_ms,
      summary.p10_ms, summary.p90_ms, static_cast<long long>(fill.prefill_calls),
      static_cast<long long>(fill.decode_calls), fill.ms);
  if (flags.json.empty()) {
    std::printf("%s\n", result.dump().c_str());
    return kExitOk;
  }
  out << result.dump(2) << "\n";
  out.close();
  if (!out) {
    return Fail(kExitFail, "cannot write " + flags.json);
  }
  return kExitOk;
}

}  // namespace
}  // namespace executorch_trt::benchmarks

int main(int argc, char** argv) {
  using namespace executorch_trt::benchmarks;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  DecodeStepFlags flags;
  std::string error;
  switch (ParseDecodeStepFlags(argc, argv, &flags, &error)) {
    case ParseStatus::kHelp:
      std::fputs(kUsage, stdout);
      return kExitOk;
    case ParseStatus::kUsage:
      std::fprintf(stderr, "%s: %s\n\n%s", kName, error.c_str(), kUsage);
      return kExitUsage;
    case ParseStatus::kRun:
      break;
  }
  return Run(flags);
}
