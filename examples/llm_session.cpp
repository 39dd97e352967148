// Copyright (c) executorch-trt authors.
//
// llm_session: one turn of a conversation with an LLM program from C++, driven with token ids
// (extension/llm: LlmProgram and Session). The C++ counterpart of //:chat without a tokenizer.
//
// usage: llm_session --model M.pte [--data M.ptd] [--max-context-len N] --prompt 1,2,3
//                    [--max-new-tokens N] [--session FILE]
//
// Prefills the prompt's token ids after the tokens the session holds, then generates greedily
// up to --max-new-tokens tokens (stopping after an id of the program's get_eos_ids, or when the
// cache is full). Standard output gets the generated ids, comma-separated, as they are
// generated. Standard error gets first a line naming the engine the program's delegates run on
// (read off the program: examples/plan_delegates.h; the same text as //:chat's), then the turn's
// statistics, as //:chat prints them: prompt tokens, time to first token (the prompt's prefill,
// whose logits give the first new token), prefill tok/s, generated tokens, decode tok/s, and the
// positions held. No BOS is added: the ids are run as given.
//
// With --session FILE the conversation is loaded from FILE when it exists (a file saved by this
// tool, by Session::Save or by executorch_trt.llm's Session.save; refused, exit 2, when it is
// from another program or damaged, or cannot be read, saying why: "cannot read the session file
// (Is a directory)") and saved to FILE after the turn.
//
// Exit: 0 after the turn; 2 bad usage or bad input, named (a missing flag or file, a program
// that is not an LLM program, a refused session file, a token id outside the vocabulary, a
// prompt that does not fit); 1 when running the program or saving the session fails.

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <executorch/runtime/platform/runtime.h>

#include "examples/command_line.h"
#include "examples/plan_delegates.h"
#include "examples/readable_file.h"
#include "extension/llm/llm_program.h"
#include "extension/llm/session.h"

ABSL_FLAG(std::string, model, "", "the program (.pte)");
ABSL_FLAG(std::string, data, "", "the program's external data file (.ptd)");
ABSL_FLAG(int64_t, max_context_len, 0, "KV cache positions, for a program without metadata");
ABSL_FLAG(std::string, prompt, "", "token ids, comma-separated");
ABSL_FLAG(int64_t, max_new_tokens, 64, "most tokens generated");
ABSL_FLAG(std::string, session, "", "load the conversation from FILE if it exists; save it there");
ABSL_FLAG(std::string, default_model, "", "the Bazel target's program (runfiles-relative)");
ABSL_FLAG(int64_t, default_max_context_len, 0, "--max-context-len for the default program");

namespace executorch_trt::examples {
namespace {

using extension::llm::LlmProgram;
using extension::llm::Session;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;

constexpr char kUsage[] =
    "usage: llm_session --model PROGRAM.pte [--data PROGRAM.ptd] [--max-context-len N]\n"
    "                   --prompt ID,ID,... [--max-new-tokens N] [--session FILE]\n"
    "\n"
    "One turn of a conversation with an LLM program (forward(tokens, positions), or prefill\n"
    "and decode, over a static KV cache the session owns), driven with token ids: prefills the\n"
    "prompt, generates greedily, prints the generated ids on stdout and the engine and the\n"
    "turn's statistics on stderr. Without --model, the Bazel target's example program.\n"
    "\n"
    "  --model PATH          the program, relative to where you ran Bazel\n"
    "  --data PATH           its external data file (.ptd), if it has one\n"
    "  --max-context-len N   KV cache positions, for a program without get_max_context_len\n"
    "  --prompt IDS          token ids, comma-separated (no BOS is added)\n"
    "  --max-new-tokens N    most tokens generated (default 64; stops at get_eos_ids)\n"
    "  --session FILE        load the conversation from FILE if it exists, save it there after\n"
    "                        the turn (the format executorch_trt.llm reads and writes)\n"
    "\n"
    "Exit status: 0 after the turn, 1 the program or the save failed, 2 bad usage or input.\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "llm_session: %s\n", message.c_str());
  return kExitUsage;
}

// The caller's input was refused (exit 2) rather than the program failing (exit 1).
bool IsBadInput(Error err) { return err == Error::InvalidArgument || err == Error::InvalidState; }

// "1,2,3" as ids; false for an empty list or an item that is not an integer.
bool ParseIds(const std::string& text, std::vector<int64_t>* ids) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    try {
      ids->push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      return false;
    }
    while (used < item.size() && item[used] == ' ') {
      ++used;
    }
    if (used != item.size()) {
      return false;
    }
    start = end + 1;
  }
  return !ids->empty();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Which engines the program's TensorRTBackend delegates use, then any other backends: what
// //:chat prints (executorch_trt.inspection's engine_summary), e.g. "engine portable (nested
// ExecuTorch program with XNNPACK, on the CPU)".
std::string EngineSummary(const ProgramDelegates& program) {
  constexpr char kBackend[] = "TensorRTBackend";
  std::vector<std::string> engines;
  std::vector<std::string> others;
  bool any = false;
  const auto add = [](std::vector<std::string>* list, const std::string& item) {
    if (std::find(list->begin(), list->end(), item) == list->end()) {
      list->push_back(item);
    }
  };
  for (const MethodDelegates& method : program.methods) {
    for (const PlanDelegate& d : method.delegates) {
      any = true;
      if (d.backend == kBackend) {
        add(&engines, d.EngineDescription().substr(std::strlen("engine ")));
      } else {
        add(&others, d.backend);
      }
    }
  }
  const auto join = [](const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) {
      text += (text.empty() ? "" : ", ") + item;
    }
    return text;
  };
  if (!any) {
    return "no delegate (ExecuTorch's CPU kernels)";
  }
  if (engines.empty()) {
    return std::string("no ") + kBackend + " delegate (" + join(others) + " delegates)";
  }
  return (engines.size() == 1 ? "engine " : "engines ") + join(engines) +
         (others.empty() ? "" : "; other delegates: " + join(others));
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto non_negative = [](const int64_t& v) { return v >= 0; };
  const std::vector<ToolFlag> tool_flags = {
      MakeToolFlag(FLAGS_model),
      MakeToolFlag(FLAGS_data, "the path of a .ptd file",
                   [](const std::string& path) { return !path.empty(); }),
      MakeToolFlag(FLAGS_max_context_len, "a positive integer",
                   [](const int64_t& v) { return v > 0; }),
      MakeToolFlag(FLAGS_prompt),
      MakeToolFlag(FLAGS_max_new_tokens, "an integer >= 0", non_negative),
      MakeToolFlag(FLAGS_session, "a file path", [](const std::string& p) { return !p.empty(); }),
      MakeToolFlag(FLAGS_default_model),
      MakeToolFlag(FLAGS_default_max_context_len, "an integer >= 0", non_negative),
  };
  std::string error;
  const ParseStatus parsed = ParseCommandLine(argc, argv, tool_flags, &error);
  if (parsed == ParseStatus::kHelp) {
    std::printf("%s", kUsage);
    return kExitOk;
  }
  if (parsed != ParseStatus::kRun) {
    std::fprintf(stderr, "llm_session: %s\n\n%s", error.c_str(), kUsage);
    return kExitUsage;
  }
  std::string model = ResolveUserPath(absl::GetFlag(FLAGS_model));
  int64_t max_context_len = absl::GetFlag(FLAGS_max_context_len);
  if (model.empty()) {
    // The target's example program (no metadata methods: its cache size comes with it).
    model = absl::GetFlag(FLAGS_default_model);
    if (max_context_len == 0) {
      max_context_len = absl::GetFlag(FLAGS_default_max_context_len);
    }
  }
  if (model.empty()) {
    return Usage("--model is required\n\n" + std::string(kUsage));
  }
  const std::string data = ResolveUserPath(absl::GetFlag(FLAGS_data));
  const std::string session_path = ResolveUserPath(absl::GetFlag(FLAGS_session));
  std::vector<int64_t> prompt;
  if (absl::GetFlag(FLAGS_prompt).empty()) {
    return Usage("--prompt is required: the token ids to run, e.g. --prompt 1,2,3");
  }
  if (!ParseIds(absl::GetFlag(FLAGS_prompt), &prompt)) {
    return Usage("--prompt must be token ids separated by commas, e.g. 1,2,3, got '" +
                 absl::GetFlag(FLAGS_prompt) + "'");
  }
  for (const std::string& path : {model, data}) {
    if (!path.empty() && !IsReadableFile(path)) {
      return Usage(path + ": no such file (or not readable)");
    }
  }

  executorch::runtime::runtime_init();
  Result<std::shared_ptr<LlmProgram>> program =
      LlmProgram::Load(model, &error, data, max_context_len);
  if (!program.ok()) {
    return Usage(error);
  }
  LlmProgram& p = *program.get();
  auto delegates = ReadProgramDelegates(model, &error);
  if (!delegates.ok()) {
    return Usage(error);
  }
  std::unique_ptr<Session> session;
  std::string resumed;
  if (!session_path.empty() && Exists(session_path)) {
    Result<std::unique_ptr<Session>> loaded = p.LoadSession(session_path, &error);
    if (!loaded.ok()) {
      return Usage(error);
    }
    session = std::move(loaded.get());
    resumed = ", resumed " + std::to_string(session->position()) + " tokens from " + session_path;
  } else {
    session = p.NewSession();
  }
  std::fprintf(stderr, "llm_session: %s: %s%s\n", model.c_str(),
               EngineSummary(delegates.get()).c_str(), resumed.c_str());

  auto start = std::chrono::steady_clock::now();
  Result<std::vector<float>> logits = session->Prefill(prompt, &error);
  const double prefill_s = Seconds(start);
  if (!logits.ok()) {
    std::fprintf(stderr, "llm_session: %s\n", error.c_str());
    return IsBadInput(logits.error()) ? kExitUsage : kExitFailed;
  }
  size_t generated = 0;
  start = std::chrono::steady_clock::now();
  Result<std::vector<int64_t>> tokens = session->Generate(
      absl::GetFlag(FLAGS_max_new_tokens), p.eos_ids(), &error, [&](int64_t token) {
        std::printf(generated++ ? ",%lld" : "%lld", static_cast<long long>(token));
        std::fflush(stdout);
      });
  const double decode_s = Seconds(start);
  std::printf("\n");
  if (!tokens.ok()) {
    std::fprintf(stderr, "llm_session: %s\n", error.c_str());
    return IsBadInput(tokens.error()) ? kExitUsage : kExitFailed;
  }
  std::fprintf(stderr,
               "llm_session: prompt %zu tokens, time to first token %.1f ms, prefill %.1f tok/s, "
               "generated %zu tokens, decode %.1f tok/s; the session holds %lld of %lld "
               "positions\n",
               prompt.size(), prefill_s * 1e3, prompt.size() / prefill_s, generated,
               generated ? generated / decode_s : 0.0, static_cast<long long>(session->position()),
               static_cast<long long>(p.max_context_len()));
  if (session->position() == p.max_context_len() &&
      static_cast<int64_t>(generated) < absl::GetFlag(FLAGS_max_new_tokens)) {
    std::fprintf(stderr,
                 "llm_session: stopped early: the cache is full; start a new conversation\n");
  }
  if (!session_path.empty()) {
    const Error err = session->Save(session_path, &error);
    if (err != Error::Ok) {
      std::fprintf(stderr, "llm_session: %s\n", error.c_str());
      return kExitFailed;
    }
  }
  return kExitOk;
}

}  // namespace
}  // namespace executorch_trt::examples

int main(int argc, char** argv) { return executorch_trt::examples::Main(argc, argv); }
