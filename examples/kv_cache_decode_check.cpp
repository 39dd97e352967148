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
//                 no step copies state: 0 "state bytes copied" = the bytes the delegate copied
//                 (its counter, core/binding/copy_counter.h) + the bytes ExecuTorch writes
//                 back into mutable buffers per call of the method (`aten::copy_` and
//                 `et_copy_index` in its execution plan, examples/plan_copies.h).
//                 --allow-state-copies reports those bytes but does not fail on them (for
//                 programs exported with kv_cache="copy_back").
//   2. reload:    a second, fresh load of the same file reproduces step 0 (loads are isolated
//                 and start from the known state).
//   3. sessions:  K conversations with different prompts, each with its own cache memory
//                 owned by this program and bound by buffer name before every execute,
//                 interleaved step by step, give exactly the tokens and logits each gives
//                 when run alone; conversation 0 (the reference prompt) also matches the
//                 reference.
// Exit: 0 all checks passed; 1 a check failed ("FAIL: <what>, at <where>"); 2 bad usage or
// an unreadable/invalid model or reference (a message naming the file and the problem).
#include <algorithm>
#include <iterator>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/runtime.h>

#include "core/binding/copy_counter.h"
#include "examples/plan_copies.h"
#include "examples/reference.h"

namespace executorch_trt::examples {
namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::Program;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: kv_cache_decode_check --model PROGRAM.pte --reference REFERENCE.json\n"
    "                             [--steps N] [--tol T] [--checksum-tol C] [--sessions K]\n"
    "                             [--allow-state-copies] [--quiet]\n"
    "\n"
    "Runs the program's `prefill` and `decode` methods (ExecuTorch Module, shared memory\n"
    "arenas, the TensorRT delegate linked in) and checks tokens, logits and the KV cache\n"
    "itself against the eager reference after every step; then a fresh reload; then K\n"
    "interleaved conversations, each with its own cache memory bound by buffer name.\n"
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
    "  --checksum-tol C     cache checksums: |diff| <= C * max(1, sum|cache|) (default 1e-4)\n"
    "  --sessions K         interleaved conversations for the sessions check (default 2;\n"
    "                       0 skips it; at most 64)\n"
    "  --allow-state-copies report state bytes copied but do not fail on them: checks a\n"
    "                       program that legitimately copies its state back (e.g. exported\n"
    "                       with kv_cache=\"copy_back\") for correctness only\n"
    "  --quiet              no per-step progress lines\n"
    "\n"
    "Exit status: 0 PASS, 1 a check failed, 2 bad usage or unreadable/invalid input.\n";

struct Flags {
  std::string model;      // as given on the command line (relative to the user's directory)
  std::string reference;
  // Set by the Bazel target (runfiles-relative): used only when neither --model nor
  // --reference is given, so a user's paths are never mixed with the built-in pair.
  std::string default_model;
  std::string default_reference;
  int steps = -1;
  double tol = 1e-4;
  double checksum_tol = 1e-4;
  int sessions = 2;
  bool quiet = false;
  bool allow_state_copies = false;  // report copies of state, do not fail on them
  bool user_paths = false;  // --model/--reference came from the command line
};

// Thrown nowhere: every failure is returned as an Outcome.
struct Outcome {
  int exit_code = kExitPass;
  std::string message;
  static Outcome Pass() { return {}; }
  static Outcome Fail(std::string m) { return {kExitFail, std::move(m)}; }
  static Outcome Invalid(std::string m) { return {kExitUsage, std::move(m)}; }
  bool ok() const { return exit_code == kExitPass; }
};

bool ParseNumber(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

constexpr int kMaxSessions = 64;

// Returns kExitPass to go on, kExitUsage on a bad flag (message in *error), -1 for --help.
int ParseFlags(int argc, char** argv, Flags* flags, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return -1;
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + arg + "' (flags are --name VALUE or --name=VALUE)";
      return kExitUsage;
    }
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "--quiet" || arg == "--allow-state-copies") {
      if (has_value) {
        *error = arg + " takes no value";
        return kExitUsage;
      }
      (arg == "--quiet" ? flags->quiet : flags->allow_state_copies) = true;
      continue;
    }
    static const char* const kKnown[] = {"--model", "--reference", "--default-model", "--default-reference",
                                         "--steps", "--sessions", "--tol", "--checksum-tol"};
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return arg == k; }) ==
        std::end(kKnown)) {
      *error = "unknown flag " + arg;
      return kExitUsage;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = "flag " + arg + " needs a value";
        return kExitUsage;
      }
      value = argv[++i];
    }
    double number = 0;
    if (arg == "--model") {
      flags->model = value;
    } else if (arg == "--reference") {
      flags->reference = value;
    } else if (arg == "--default-model") {
      flags->default_model = value;
    } else if (arg == "--default-reference") {
      flags->default_reference = value;
    } else if (arg == "--steps" || arg == "--sessions") {
      const double limit = arg == "--steps" ? 1e6 : kMaxSessions;
      if (!ParseNumber(value, &number) || number < 0 || number != std::floor(number) || number > limit) {
        *error = arg + " must be an integer in [0, " + std::to_string(static_cast<long>(limit)) + "], got '" +
                 value + "'";
        return kExitUsage;
      }
      (arg == "--steps" ? flags->steps : flags->sessions) = static_cast<int>(number);
    } else {  // --tol, --checksum-tol
      if (!ParseNumber(value, &number) || number <= 0) {
        *error = arg + " must be a positive number, got '" + value + "'";
        return kExitUsage;
      }
      (arg == "--tol" ? flags->tol : flags->checksum_tol) = number;
    }
  }
  if (flags->model.empty() != flags->reference.empty()) {
    *error = "give --model and --reference together (a program and the reference written for it)";
    return kExitUsage;
  }
  if (flags->model.empty()) {
    flags->model = flags->default_model;
    flags->reference = flags->default_reference;
  } else {
    flags->user_paths = true;
  }
  if (flags->model.empty() || flags->reference.empty()) {
    *error = "--model and --reference are required";
    return kExitUsage;
  }
  return kExitPass;
}

// The names of `method`'s named mutable buffers (MethodMeta attributes), comma-separated,
// or "none".
std::string AttributeNames(const Method& method) {
  const auto meta = method.method_meta();
  std::string names;
  for (size_t i = 0; i < meta.num_attributes(); ++i) {
    auto info = meta.attribute_tensor_meta(i);
    if (info.ok()) {
      names += (names.empty() ? "'" : ", '") + std::string(info->name()) + "'";
    }
  }
  return names.empty() ? "none" : names;
}

// One loaded program: its prefill and decode methods and their cache tensors.
class LoadedProgram {
 public:
  // Loads `path` with shared memory arenas (prefill and decode share one cache) and full
  // flatbuffer verification (a corrupted file is rejected, never executed).
  static Outcome Load(const std::string& path, const Reference& ref, std::unique_ptr<LoadedProgram>* out) {
    auto p = std::unique_ptr<LoadedProgram>(new LoadedProgram());
    p->module_ = std::make_unique<Module>(path, Module::LoadMode::File, nullptr, nullptr, nullptr,
                                          /*share_memory_arenas=*/true);
    Error err = p->module_->load(Program::Verification::InternalConsistency);
    if (err != Error::Ok) {
      return Outcome::Invalid(path + ": not a loadable ExecuTorch program (error " +
                              std::to_string(static_cast<int>(err)) + "); re-export it");
    }
    for (const char* name : {"prefill", "decode"}) {
      err = p->module_->load_method(name);
      if (err != Error::Ok) {
        return Outcome::Invalid(path + ": cannot load method '" + name + "' (error " +
                                std::to_string(static_cast<int>(err)) +
                                "): the program has no such method, or a delegate in it failed to "
                                "initialise (see the log above; a corrupted blob is rejected here)");
      }
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    p->prefill_ = p->module_->method("prefill").get();
    p->decode_ = p->module_->method("decode").get();
#pragma GCC diagnostic pop
    for (Method* m : {p->prefill_, p->decode_}) {
      std::vector<Tensor> tensors;
      for (const auto& spec : ref.caches) {
        auto t = m->get_attribute(spec.name);
        if (!t.ok()) {
          return Outcome::Invalid(path + ": no mutable buffer named '" + spec.name +
                                  "'; the program's named buffers are: " +
                                  AttributeNames(*m) +
                                  " (none: export with emit_mutable_buffer_names=True; "
                                  "else the reference belongs to another model)");
        }
        if (t->scalar_type() != ScalarType::Float || t->numel() != spec.numel()) {
          return Outcome::Invalid(path + ": buffer '" + spec.name + "' has " +
                                  std::to_string(t->numel()) + " elements of dtype " +
                                  executorch::runtime::toString(t->scalar_type()) +
                                  ", the reference expects " + std::to_string(spec.numel()) +
                                  " float32");
        }
        tensors.push_back(*t);
      }
      p->caches_.push_back(std::move(tensors));
    }
    const auto meta = p->prefill_->method_meta().input_tensor_meta(0);
    if (!meta.ok() || meta->sizes().size() != 2 ||
        meta->sizes()[1] != static_cast<int64_t>(ref.prompt.size())) {
      return Outcome::Invalid(path + ": prefill's input_ids must be [1, " +
                              std::to_string(ref.prompt.size()) +
                              "] (the reference prompt length)");
    }
    *out = std::move(p);
    return Outcome::Pass();
  }

  // The cache tensors of `method` (0 = prefill, 1 = decode), in reference order.
  const std::vector<Tensor>& caches(int method) const { return caches_[method]; }

  // Binds every cache of both methods to `storage` (one buffer per cache, in reference
  // order): the application owns the memory; the delegate updates it in place.
  Outcome BindCaches(std::vector<std::vector<float>>* storage) {
    for (const auto& tensors : caches_) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        auto& mem = (*storage)[i];
        if (executorch::runtime::internal::set_tensor_data(tensors[i], mem.data(),
                                                           mem.size() * sizeof(float)) != Error::Ok) {
          return Outcome::Fail("binding session memory to cache " + std::to_string(i) + " failed");
        }
      }
    }
    return Outcome::Pass();
  }

  // Runs prefill (step 0, `tokens` = the prompt) or decode (one token at `start`).
  // Returns the last-position logits in *logits.
  Outcome Run(bool is_prefill, const std::vector<int64_t>& tokens, int64_t start,
              std::vector<float>* logits, const std::string& where) {
    const auto n = static_cast<executorch::aten::SizesType>(tokens.size());
    std::vector<int64_t> positions(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = start + static_cast<int64_t>(i);
    auto ids = executorch::extension::make_tensor_ptr({1, n}, std::vector<int64_t>(tokens));
    auto pos = executorch::extension::make_tensor_ptr({n}, std::move(positions));
    auto result = module_->execute(is_prefill ? "prefill" : "decode", {EValue(*ids), EValue(*pos)});
    if (!result.ok()) {
      return Outcome::Fail(std::string(is_prefill ? "prefill" : "decode") + " failed with error " +
                           std::to_string(static_cast<int>(result.error())) + ", at " + where);
    }
    if (result->empty() || !(*result)[0].isTensor()) {
      return Outcome::Fail("the method returned no logits tensor, at " + where);
    }
    const Tensor out = (*result)[0].toTensor();
    if (out.scalar_type() != ScalarType::Float || out.dim() != 3 || out.size(1) != n) {
      return Outcome::Fail("logits must be float32 [1, " + std::to_string(n) + ", V], at " + where);
    }
    const int64_t vocab = out.size(2);
    const float* data = out.const_data_ptr<float>() + (n - 1) * vocab;
    logits->assign(data, data + vocab);
    return Outcome::Pass();
  }

 private:
  LoadedProgram() = default;
  std::unique_ptr<Module> module_;
  Method* prefill_ = nullptr;
  Method* decode_ = nullptr;
  std::vector<std::vector<Tensor>> caches_;
};

int64_t Argmax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// Max |a - b|; +inf if any difference is not finite (a NaN or inf never passes a tolerance).
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!std::isfinite(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, std::fabs(double(x)));
  return m;
}

std::string StepName(int step) {
  return step == 0 ? std::string("step 0 (prefill)") : "step " + std::to_string(step) + " (decode)";
}

struct StepRow {
  int step;
  int64_t token;
  int64_t ref_token;
  double max_dlogit;
  double max_dchecksum;
  uint64_t delegate_copied;  // the delegate's copy counter across this execute
  uint64_t written_back;     // ExecuTorch's write-backs per call of the method (its plan)
  double ms;
  // Every byte of state this step copied.
  uint64_t state_copied() const { return delegate_copied + written_back; }
};

const char* MethodOfStep(int step) { return step == 0 ? "prefill" : "decode"; }

// "'key_cache_0' 16384 B, 'value_cache_0' 16384 B": each write-back of `method`.
std::string ListWriteBacks(const MethodCopies& method) {
  std::string list;
  for (const auto& copy : method.copies) {
    list += (list.empty() ? "" : ", ") + copy.DestinationLabel() + " " + std::to_string(copy.bytes) + " B";
    if (copy.op != "aten::copy_") list += " (" + copy.op + ")";
  }
  return list;
}

// " (an estimate: ...)" when the plan's per-call figure is not exact, else "".
std::string ExactnessNote(const MethodCopies& method) {
  return method.exact ? ""
                      : " (an estimate: the plan has control flow or dynamic shapes, so a copy may run "
                        "more or less than once per call)";
}

// The in-place check's failure: what `method` copied in one call and who copied it.
std::string StateCopiesMessage(const std::string& method, uint64_t delegate_bytes, const MethodCopies& write_backs,
                               const Reference& ref) {
  std::string m = method + " copies state:";
  if (!write_backs.copies.empty()) {
    m += " ExecuTorch writes back " + std::to_string(write_backs.BytesPerCall()) + " bytes per call (" +
         ListWriteBacks(write_backs) + ")" + ExactnessNote(write_backs);
  }
  if (delegate_bytes != 0) {
    m += std::string(write_backs.copies.empty() ? "" : ";") + " the delegate copied " +
         std::to_string(delegate_bytes) + " bytes (its aliased outputs are not the buffers themselves)";
  }
  m += "; a program that updates its state in place copies none";
  if (ref.kv_cache == "copy_back") {
    m += " (the reference says this program was exported with kv_cache=\"copy_back\")";
  }
  return m + ": run with --allow-state-copies to check such a program for correctness only";
}

// Check 1: fresh load, known state, prefill + decode against the reference, in place (no
// state copied, per `plan_copies` and the delegate's counter, unless --allow-state-copies).
Outcome CheckRun(const Flags& flags, const Reference& ref, int steps, const ProgramCopies& plan_copies,
                 std::vector<StepRow>* rows) {
  std::unique_ptr<LoadedProgram> p;
  Outcome o = LoadedProgram::Load(flags.model, ref, &p);
  if (!o.ok()) return o;
  for (size_t c = 0; c < ref.caches.size(); ++c) {
    const Tensor& a = p->caches(0)[c];
    const Tensor& b = p->caches(1)[c];
    if (a.const_data_ptr() != b.const_data_ptr()) {
      return Outcome::Fail("cache " + ref.caches[c].name +
                           " is not shared: prefill and decode see different storage (export "
                           "with share_mutable_buffers, load with shared memory arenas)");
    }
    const float* d = a.const_data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (d[i] != 0.0f) {
        return Outcome::Fail("a fresh load does not start from the known state: cache " +
                             ref.caches[c].name + "[" + std::to_string(i) + "] = " +
                             std::to_string(d[i]) + " before the first execute (expected 0)");
      }
    }
  }
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  int64_t token = 0;
  for (int step = 0; step <= steps; ++step) {
    const ReferenceStep& want = ref.steps[step];
    const std::string where = StepName(step);
    std::vector<const void*> before;
    for (const auto& c : p->caches(step == 0 ? 0 : 1)) before.push_back(c.const_data_ptr());
    std::vector<float> logits;
    const uint64_t copied_before = executorch_trt_bytes_copied();
    const auto t0 = std::chrono::steady_clock::now();
    o = step == 0 ? p->Run(true, ref.prompt, 0, &logits, where)
                  : p->Run(false, {token}, t + step - 1, &logits, where);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!o.ok()) return o;
    const MethodCopies& write_backs = *plan_copies.Find(MethodOfStep(step));
    StepRow row{step, Argmax(logits), want.token, 0, 0, executorch_trt_bytes_copied() - copied_before,
                write_backs.BytesPerCall(), ms};
    if (static_cast<int64_t>(logits.size()) != ref.vocab_size) {
      return Outcome::Fail("logits have " + std::to_string(logits.size()) + " entries, the reference " +
                           std::to_string(ref.vocab_size) + ", at " + where);
    }
    row.max_dlogit = MaxAbsDiff(logits, want.logits);
    for (size_t c = 0; c < ref.caches.size(); ++c) {
      const Tensor& cache = p->caches(step == 0 ? 0 : 1)[c];
      if (cache.const_data_ptr() != before[c]) {
        return Outcome::Fail("cache " + ref.caches[c].name + " storage moved during execute, at " + where);
      }
      const Checksum got = CacheChecksum(cache.const_data_ptr<float>(), cache.numel());
      const Checksum& exp = want.cache_checksums.at(ref.caches[c].name);
      for (size_t k = 0; k < 2; ++k) {
        // Relative to the cache's scale (sum |x|, resp. sum |x| w), not to the signed sum,
        // which can be near zero.
        const double d = std::fabs(got[k] - exp[k]);
        const double scale = std::max(1.0, exp[k + 2]);
        row.max_dchecksum = std::max(row.max_dchecksum, d / scale);
        if (!(d <= flags.checksum_tol * scale)) {  // NaN fails too
          rows->push_back(row);
          return Outcome::Fail("cache " + ref.caches[c].name + " differs from the reference (checksum " +
                               std::to_string(k) + ": " + std::to_string(got[k]) + " vs " +
                               std::to_string(exp[k]) + "), at " + where);
        }
      }
    }
    rows->push_back(row);
    if (!flags.quiet) {
      std::printf("  %-18s token %5lld (ref %5lld)  max|dlogit| %.2e  cache ok  state copied %6llu B  %8.2f ms\n",
                  where.c_str(), static_cast<long long>(row.token), static_cast<long long>(want.token),
                  row.max_dlogit, static_cast<unsigned long long>(row.state_copied()), ms);
      std::fflush(stdout);
    }
    if (!flags.allow_state_copies && row.state_copied() != 0) {
      return Outcome::Fail(StateCopiesMessage(MethodOfStep(step), row.delegate_copied, write_backs, ref) +
                           ", at " + where);
    }
    if (row.token != want.token) {
      return Outcome::Fail("token " + std::to_string(row.token) + " != reference " +
                           std::to_string(want.token) + ", at " + where);
    }
    if (!(row.max_dlogit <= flags.tol * std::max(1.0, MaxAbs(want.logits)))) {
      return Outcome::Fail("logits differ by " + std::to_string(row.max_dlogit) + " (tolerance " +
                           std::to_string(flags.tol) + " x scale), at " + where);
    }
    token = row.token;
  }
  return Outcome::Pass();
}

// Check 2: a second fresh load reproduces step 0 exactly as the reference says.
Outcome CheckReload(const Flags& flags, const Reference& ref) {
  std::unique_ptr<LoadedProgram> p;
  Outcome o = LoadedProgram::Load(flags.model, ref, &p);
  if (!o.ok()) return o;
  std::vector<float> logits;
  o = p->Run(true, ref.prompt, 0, &logits, "reload, step 0 (prefill)");
  if (!o.ok()) return o;
  if (Argmax(logits) != ref.steps[0].token ||
      !(MaxAbsDiff(logits, ref.steps[0].logits) <= flags.tol * std::max(1.0, MaxAbs(ref.steps[0].logits)))) {
    return Outcome::Fail("a fresh reload does not reproduce the reference, at reload step 0 (prefill)");
  }
  return Outcome::Pass();
}

// One conversation: its prompt, its own cache memory, and what it produced.
struct Session {
  std::vector<int64_t> prompt;
  std::vector<std::vector<float>> memory;  // one zeroed buffer per cache
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};

Session NewSession(const Reference& ref, int index) {
  Session s;
  for (int64_t tok : ref.prompt) s.prompt.push_back((tok + 7 * index) % ref.vocab_size);
  for (const auto& spec : ref.caches) s.memory.emplace_back(static_cast<size_t>(spec.numel()), 0.0f);
  return s;
}

Outcome StepSession(LoadedProgram* p, Session* s, int step, int64_t t, const std::string& who) {
  Outcome o = p->BindCaches(&s->memory);
  if (!o.ok()) return o;
  std::vector<float> logits;
  const std::string where = who + ", " + StepName(step);
  o = step == 0 ? p->Run(true, s->prompt, 0, &logits, where)
                : p->Run(false, {s->tokens.back()}, t + step - 1, &logits, where);
  if (!o.ok()) return o;
  for (size_t c = 0; c < s->memory.size(); ++c) {
    if (p->caches(step == 0 ? 0 : 1)[c].const_data_ptr() != s->memory[c].data()) {
      return Outcome::Fail("cache " + std::to_string(c) + " is no longer the session's memory, at " + where);
    }
  }
  s->tokens.push_back(Argmax(logits));
  s->logits.push_back(std::move(logits));
  return Outcome::Pass();
}

// Check 3: K conversations on one loaded program, alone and interleaved, agree exactly.
Outcome CheckSessions(const Flags& flags, const Reference& ref, int steps) {
  std::unique_ptr<LoadedProgram> p;
  Outcome o = LoadedProgram::Load(flags.model, ref, &p);
  if (!o.ok()) return o;
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  std::vector<Session> alone, interleaved;
  for (int k = 0; k < flags.sessions; ++k) {
    alone.push_back(NewSession(ref, k));
    for (int step = 0; step <= steps; ++step) {
      o = StepSession(p.get(), &alone[k], step, t, "session " + std::to_string(k) + " alone");
      if (!o.ok()) return o;
    }
    interleaved.push_back(NewSession(ref, k));
  }
  for (int step = 0; step <= steps; ++step) {
    for (int k = 0; k < flags.sessions; ++k) {
      o = StepSession(p.get(), &interleaved[k], step, t, "session " + std::to_string(k) + " interleaved");
      if (!o.ok()) return o;
    }
  }
  for (int k = 0; k < flags.sessions; ++k) {
    for (int step = 0; step <= steps; ++step) {
      if (interleaved[k].tokens[step] != alone[k].tokens[step] ||
          MaxAbsDiff(interleaved[k].logits[step], alone[k].logits[step]) != 0.0) {
        return Outcome::Fail("session " + std::to_string(k) + " interleaved differs from running alone, at " +
                             StepName(step));
      }
    }
  }
  if (!alone.empty()) {
    for (int step = 0; step <= steps; ++step) {
      if (alone[0].tokens[step] != ref.steps[step].token) {
        return Outcome::Fail("session 0 (reference prompt, own memory) token " +
                             std::to_string(alone[0].tokens[step]) + " != reference " +
                             std::to_string(ref.steps[step].token) + ", at " + StepName(step));
      }
    }
  }
  if (!flags.quiet) {
    std::printf("  %d sessions, %d steps each: interleaved == alone, session 0 == reference\n",
                flags.sessions, steps + 1);
  }
  return Outcome::Pass();
}

// The per-step table and the state-copies summary line.
void PrintTable(const std::vector<StepRow>& rows, bool allow_state_copies) {
  std::printf(
      "\n  step  token  ref    max|dlogit|  max rel dchecksum  state bytes copied  (delegate + write-back)  "
      "latency ms\n");
  uint64_t delegate = 0, written_back = 0;
  for (const auto& r : rows) {
    std::printf("  %4d  %5lld  %5lld  %11.2e  %17.2e  %18llu  (%8llu + %10llu)  %10.2f\n", r.step,
                static_cast<long long>(r.token), static_cast<long long>(r.ref_token), r.max_dlogit, r.max_dchecksum,
                static_cast<unsigned long long>(r.state_copied()), static_cast<unsigned long long>(r.delegate_copied),
                static_cast<unsigned long long>(r.written_back), r.ms);
    delegate += r.delegate_copied;
    written_back += r.written_back;
  }
  std::printf("\n  state bytes copied in %zu step%s: %llu (delegate %llu + ExecuTorch write-back %llu)%s\n\n",
              rows.size(), rows.size() == 1 ? "" : "s", static_cast<unsigned long long>(delegate + written_back),
              static_cast<unsigned long long>(delegate), static_cast<unsigned long long>(written_back),
              delegate + written_back == 0 ? ": every update in place"
              : allow_state_copies         ? ", allowed by --allow-state-copies"
                                           : "");
}

// One line per method: what ExecuTorch writes back per call, from the plan.
void PrintWriteBacks(const ProgramCopies& plan_copies) {
  for (const char* method : {"prefill", "decode"}) {
    const MethodCopies& m = *plan_copies.Find(method);
    std::printf("  %s: ExecuTorch writes back %llu bytes per call%s%s%s%s\n", method,
                static_cast<unsigned long long>(m.BytesPerCall()), m.copies.empty() ? "" : " (",
                ListWriteBacks(m).c_str(), m.copies.empty() ? "" : ")", ExactnessNote(m).c_str());
  }
}

// `bazel run` starts the binary in its runfiles directory: paths the user typed are relative
// to where they ran Bazel (BUILD_WORKING_DIRECTORY); the target's defaults are
// runfiles-relative and used as they are.
std::string ResolveUserPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

bool IsReadableFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  const bool is_file = std::fseek(f, 0, SEEK_END) == 0 && std::ftell(f) >= 0;
  std::fclose(f);
  return is_file;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave correctly with stderr
  Flags flags;
  std::string error;
  const int parsed = ParseFlags(argc, argv, &flags, &error);
  if (parsed == -1) {
    std::fputs(kUsage, stdout);
    return kExitPass;
  }
  if (parsed != kExitPass) {
    std::fprintf(stderr, "kv_cache_decode_check: %s\n\n%s", error.c_str(), kUsage);
    return kExitUsage;
  }
  if (flags.user_paths) {
    flags.model = ResolveUserPath(flags.model);
    flags.reference = ResolveUserPath(flags.reference);
  }
  if (!IsReadableFile(flags.model)) {
    std::fprintf(stderr, "kv_cache_decode_check: %s: no such file (or not readable)\n", flags.model.c_str());
    return kExitUsage;
  }
  Reference ref;
  if (!LoadReference(flags.reference, &ref, &error)) {
    std::fprintf(stderr, "kv_cache_decode_check: %s\n", error.c_str());
    return kExitUsage;
  }
  const int available = static_cast<int>(ref.steps.size()) - 1;
  if (flags.steps > available) {
    std::fprintf(stderr, "kv_cache_decode_check: --steps %d but %s has only %d decode steps\n", flags.steps,
                 flags.reference.c_str(), available);
    return kExitUsage;
  }
  const int steps = flags.steps < 0 ? available : flags.steps;
  auto plan_copies = ReadProgramCopies(flags.model, &error);
  if (!plan_copies.ok()) {
    std::fprintf(stderr, "kv_cache_decode_check: %s\n", error.c_str());
    return kExitUsage;
  }
  for (const char* method : {"prefill", "decode"}) {
    if (plan_copies->Find(method) == nullptr) {
      std::fprintf(stderr, "kv_cache_decode_check: %s: the program has no method '%s' (it has: %s)\n",
                   flags.model.c_str(), method, plan_copies->MethodNames().c_str());
      return kExitUsage;
    }
  }
  executorch::runtime::runtime_init();

  std::printf("kv_cache_decode_check: %s (prompt %zu tokens, %d decode steps, %zu caches)\n",
              flags.model.c_str(), ref.prompt.size(), steps, ref.caches.size());
  PrintWriteBacks(*plan_copies);
  std::vector<StepRow> rows;
  struct NamedCheck {
    const char* name;
    Outcome outcome;
  };
  std::vector<NamedCheck> done;
  std::printf("[1/3] fresh load, prefill + %d decode steps vs reference\n", steps);
  done.push_back({"run", CheckRun(flags, ref, steps, *plan_copies, &rows)});
  if (done.back().outcome.ok()) {
    std::printf("[2/3] fresh reload starts from the known state\n");
    done.push_back({"reload", CheckReload(flags, ref)});
  }
  if (done.back().outcome.ok() && flags.sessions > 0) {
    std::printf("[3/3] %d interleaved sessions, each with its own cache memory\n", flags.sessions);
    done.push_back({"sessions", CheckSessions(flags, ref, steps)});
  }
  if (!rows.empty()) PrintTable(rows, flags.allow_state_copies);
  const Outcome& last = done.back().outcome;
  if (last.exit_code == kExitUsage) {
    std::fprintf(stderr, "kv_cache_decode_check: %s\n", last.message.c_str());
    return kExitUsage;
  }
  if (!last.ok()) {
    std::printf("FAIL: %s (check: %s)\n", last.message.c_str(), done.back().name);
    return kExitFail;
  }
  std::printf("PASS\n");
  return kExitPass;
}

}  // namespace
}  // namespace executorch_trt::examples

int main(int argc, char** argv) { return executorch_trt::examples::Main(argc, argv); }
