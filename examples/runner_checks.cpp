// Copyright (c) executorch-trt authors.

#include "examples/runner_checks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "core/binding/copy_counter.h"
#include "examples/prefill_decode_program.h"

namespace executorch_trt::examples {
namespace {

using executorch::aten::Tensor;
using executorch::runtime::Error;

int64_t Argmax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// Max |a - b|; +inf if any difference is not finite (a NaN or inf never passes a tolerance).
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!std::isfinite(d)) {
      return INFINITY;
    }
    m = std::max(m, d);
  }
  return m;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) {
    m = std::max(m, std::fabs(double(x)));
  }
  return m;
}

// max_dlogit <= tol * max(1, max |want|); false for NaN.
bool LogitsWithin(double max_dlogit, const std::vector<float>& want, double tol) {
  return max_dlogit <= tol * std::max(1.0, MaxAbs(want));
}

std::string StepName(int step) {
  return step == 0 ? std::string("step 0 (prefill)") : "step " + std::to_string(step) + " (decode)";
}

Phase PhaseOfStep(int step) { return step == 0 ? Phase::kPrefill : Phase::kDecode; }

// Loads `path` for `ref`: the caches the reference names, of its sizes, and a prefill that
// takes the reference's prompt.
Outcome LoadProgram(const std::string& path, const Reference& ref,
                    std::unique_ptr<PrefillDecodeProgram>* out) {
  std::vector<CacheBuffer> caches;
  for (const auto& spec : ref.caches) {
    caches.push_back({spec.name, spec.numel()});
  }
  std::string error;
  auto p = PrefillDecodeProgram::Load(path, caches, &error);
  if (!p.ok()) {
    return Outcome::Invalid(error);
  }
  const auto meta = (*p)->method_meta(Phase::kPrefill).input_tensor_meta(0);
  if (!meta.ok() || meta->sizes().size() != 2 ||
      meta->sizes()[1] != static_cast<int64_t>(ref.prompt.size())) {
    return Outcome::Invalid(path + ": prefill's input_ids must be [1, " +
                            std::to_string(ref.prompt.size()) + "] (the reference prompt length)");
  }
  *out = std::move(p.get());
  return Outcome::Pass();
}

// Runs step `step` of a conversation: prefill on `prompt` (step 0), else decode of
// `last_token` at position prompt length + step - 1. The last-position logits go to *logits.
Outcome RunStep(PrefillDecodeProgram* p, const std::vector<int64_t>& prompt, int step,
                int64_t last_token, std::vector<float>* logits, const std::string& where) {
  std::string error;
  const int64_t position = static_cast<int64_t>(prompt.size()) + step - 1;
  const Error err = step == 0 ? p->Prefill(prompt, logits, &error)
                              : p->Decode(last_token, position, logits, &error);
  if (err != Error::Ok) {
    return Outcome::Fail(error + ", at " + where);
  }
  return Outcome::Pass();
}

// A fresh load's caches: one storage for both methods, all zeros.
Outcome CheckKnownState(const PrefillDecodeProgram& p, const Reference& ref) {
  for (size_t c = 0; c < ref.caches.size(); ++c) {
    const Tensor& a = p.cache(Phase::kPrefill, c);
    const Tensor& b = p.cache(Phase::kDecode, c);
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
  return Outcome::Pass();
}

// After step `row->step`: each cache still at its storage `before` and its checksum within
// `checksum_tol` of the reference's (relative to the cache's scale, sum |x| resp.
// sum |x| w, not to the signed sum, which can be near zero). Sets row->max_dchecksum; a
// checksum outside the tolerance appends *row to *rows before failing.
Outcome CheckStepCaches(const PrefillDecodeProgram& p, const Reference& ref,
                        const std::vector<const void*>& before, double checksum_tol,
                        const std::string& where, StepRow* row, std::vector<StepRow>* rows) {
  const ReferenceStep& want = ref.steps[row->step];
  for (size_t c = 0; c < ref.caches.size(); ++c) {
    const std::string& name = ref.caches[c].name;
    const Tensor& cache = p.cache(PhaseOfStep(row->step), c);
    if (cache.const_data_ptr() != before[c]) {
      return Outcome::Fail("cache " + name + " storage moved during execute, at " + where);
    }
    const Checksum got = CacheChecksum(cache.const_data_ptr<float>(), cache.numel());
    const Checksum& exp = want.cache_checksums.at(name);
    for (size_t k = 0; k < 2; ++k) {
      const double d = std::fabs(got[k] - exp[k]);
      const double scale = std::max(1.0, exp[k + 2]);
      row->max_dchecksum = std::max(row->max_dchecksum, d / scale);
      if (!(d <= checksum_tol * scale)) {  // NaN fails too
        rows->push_back(*row);
        return Outcome::Fail("cache " + name + " differs from the reference (checksum " +
                             std::to_string(k) + ": " + std::to_string(got[k]) + " vs " +
                             std::to_string(exp[k]) + "), at " + where);
      }
    }
  }
  return Outcome::Pass();
}

// One conversation of the sessions check: its prompt, its own cache memory, and what it
// produced.
struct Session {
  std::vector<int64_t> prompt;
  std::vector<std::vector<float>> memory;  // one zeroed buffer per cache
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};

Session NewSession(const Reference& ref, int index) {
  Session s;
  for (int64_t tok : ref.prompt) {
    s.prompt.push_back((tok + 7 * index) % ref.vocab_size);
  }
  for (const auto& spec : ref.caches) {
    s.memory.emplace_back(static_cast<size_t>(spec.numel()), 0.0f);
  }
  return s;
}

// Binds the session's memory, runs its step `step` and records the result.
Outcome StepSession(PrefillDecodeProgram* p, Session* s, int step, const std::string& who) {
  std::string error;
  if (p->BindCaches(&s->memory, &error) != Error::Ok) {
    return Outcome::Fail(error);
  }
  std::vector<float> logits;
  const std::string where = who + ", " + StepName(step);
  const int64_t last_token = step == 0 ? 0 : s->tokens.back();
  Outcome o = RunStep(p, s->prompt, step, last_token, &logits, where);
  if (!o.ok()) {
    return o;
  }
  for (size_t c = 0; c < s->memory.size(); ++c) {
    if (p->cache(PhaseOfStep(step), c).const_data_ptr() != s->memory[c].data()) {
      return Outcome::Fail("cache " + std::to_string(c) +
                           " is no longer the session's memory, at " + where);
    }
  }
  s->tokens.push_back(Argmax(logits));
  s->logits.push_back(std::move(logits));
  return Outcome::Pass();
}

}  // namespace

Outcome CheckRun(const Flags& flags, const Reference& ref, int steps,
                 const ProgramCopies& plan_copies, std::vector<StepRow>* rows) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags.model, ref, &p);
  if (!o.ok()) {
    return o;
  }
  o = CheckKnownState(*p, ref);
  if (!o.ok()) {
    return o;
  }
  int64_t token = 0;
  for (int step = 0; step <= steps; ++step) {
    const ReferenceStep& want = ref.steps[step];
    const std::string where = StepName(step);
    const Phase phase = PhaseOfStep(step);
    std::vector<const void*> before;
    for (size_t c = 0; c < p->num_caches(); ++c) {
      before.push_back(p->cache(phase, c).const_data_ptr());
    }
    std::vector<float> logits;
    const uint64_t copied_before = BytesCopied();
    const auto t0 = std::chrono::steady_clock::now();
    o = RunStep(p.get(), ref.prompt, step, token, &logits, where);
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    if (!o.ok()) {
      return o;
    }
    const MethodCopies& write_backs = *plan_copies.Find(PhaseName(phase));
    StepRow row;
    row.step = step;
    row.token = Argmax(logits);
    row.ref_token = want.token;
    row.delegate_copied = BytesCopied() - copied_before;
    row.written_back = write_backs.BytesPerCall();
    row.ms = std::chrono::duration<double, std::milli>(elapsed).count();
    if (static_cast<int64_t>(logits.size()) != ref.vocab_size) {
      return Outcome::Fail("logits have " + std::to_string(logits.size()) +
                           " entries, the reference " + std::to_string(ref.vocab_size) + ", at " +
                           where);
    }
    row.max_dlogit = MaxAbsDiff(logits, want.logits);
    o = CheckStepCaches(*p, ref, before, flags.checksum_tol, where, &row, rows);
    if (!o.ok()) {
      return o;
    }
    rows->push_back(row);
    if (!flags.quiet) {
      PrintStepLine(where, row);
    }
    if (!flags.allow_state_copies && row.state_copied() != 0) {
      return Outcome::Fail(
          StateCopiesMessage(PhaseName(phase), row.delegate_copied, write_backs, ref) + ", at " +
          where);
    }
    if (row.token != want.token) {
      return Outcome::Fail("token " + std::to_string(row.token) + " != reference " +
                           std::to_string(want.token) + ", at " + where);
    }
    if (!LogitsWithin(row.max_dlogit, want.logits, flags.tol)) {
      return Outcome::Fail("logits differ by " + std::to_string(row.max_dlogit) + " (tolerance " +
                           std::to_string(flags.tol) + " x scale), at " + where);
    }
    token = row.token;
  }
  return Outcome::Pass();
}

Outcome CheckReload(const Flags& flags, const Reference& ref) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags.model, ref, &p);
  if (!o.ok()) {
    return o;
  }
  std::vector<float> logits;
  o = RunStep(p.get(), ref.prompt, 0, 0, &logits, "reload, step 0 (prefill)");
  if (!o.ok()) {
    return o;
  }
  const ReferenceStep& want = ref.steps[0];
  if (Argmax(logits) != want.token ||
      !LogitsWithin(MaxAbsDiff(logits, want.logits), want.logits, flags.tol)) {
    return Outcome::Fail(
        "a fresh reload does not reproduce the reference, at reload step 0 (prefill)");
  }
  return Outcome::Pass();
}

Outcome CheckSessions(const Flags& flags, const Reference& ref, int steps) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags.model, ref, &p);
  if (!o.ok()) {
    return o;
  }
  std::vector<Session> alone;
  std::vector<Session> interleaved;
  for (int k = 0; k < flags.sessions; ++k) {
    alone.push_back(NewSession(ref, k));
    for (int step = 0; step <= steps; ++step) {
      o = StepSession(p.get(), &alone[k], step, "session " + std::to_string(k) + " alone");
      if (!o.ok()) {
        return o;
      }
    }
    interleaved.push_back(NewSession(ref, k));
  }
  for (int step = 0; step <= steps; ++step) {
    for (int k = 0; k < flags.sessions; ++k) {
      o = StepSession(p.get(), &interleaved[k], step,
                      "session " + std::to_string(k) + " interleaved");
      if (!o.ok()) {
        return o;
      }
    }
  }
  for (int k = 0; k < flags.sessions; ++k) {
    for (int step = 0; step <= steps; ++step) {
      if (interleaved[k].tokens[step] != alone[k].tokens[step] ||
          MaxAbsDiff(interleaved[k].logits[step], alone[k].logits[step]) != 0.0) {
        return Outcome::Fail("session " + std::to_string(k) +
                             " interleaved differs from running alone, at " + StepName(step));
      }
    }
  }
  for (int step = 0; !alone.empty() && step <= steps; ++step) {
    if (alone[0].tokens[step] != ref.steps[step].token) {
      return Outcome::Fail("session 0 (reference prompt, own memory) token " +
                           std::to_string(alone[0].tokens[step]) + " != reference " +
                           std::to_string(ref.steps[step].token) + ", at " + StepName(step));
    }
  }
  if (!flags.quiet) {
    PrintSessionsLine(flags.sessions, steps + 1);
  }
  return Outcome::Pass();
}

}  // namespace executorch_trt::examples
