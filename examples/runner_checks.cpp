// Copyright (c) executorch-trt authors.

#include "examples/runner_checks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>

#include "core/binding/copy_counter.h"
#include "core/common/shape_string.h"
#include "core/kernels/cross_attn_cache.h"
#include "extension/program/prefill_decode_program.h"

namespace executorch_trt::examples {
namespace {

using executorch::aten::Tensor;
using executorch::runtime::Error;
using extension::CacheBuffer;
using extension::Phase;
using extension::PhaseName;
using extension::PrefillDecodeProgram;

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

// The utterance label of rows and messages: -1 for a decoder-only reference (one
// conversation, named by its steps alone).
int UtteranceLabel(const Reference& ref, size_t utterance) {
  return ref.encoder_decoder ? static_cast<int>(utterance) : -1;
}

std::string StepName(int utterance, int step) {
  std::string name =
      step == 0 ? std::string("step 0 (prefill)") : "step " + std::to_string(step) + " (decode)";
  return utterance < 0 ? name : "utterance " + std::to_string(utterance) + ", " + name;
}

Phase PhaseOfStep(int step) { return step == 0 ? Phase::kPrefill : Phase::kDecode; }

// Input `index` of `phase` is a tensor of `shape`; else an Outcome::Invalid naming it.
Outcome CheckInputShape(const PrefillDecodeProgram& p, Phase phase, size_t index,
                        const std::vector<int64_t>& shape, const std::string& path,
                        const std::string& what) {
  const auto meta = p.method_meta(phase).input_tensor_meta(index);
  if (!meta.ok() ||
      !std::equal(meta->sizes().begin(), meta->sizes().end(), shape.begin(), shape.end())) {
    return Outcome::Invalid(path + ": " + PhaseName(phase) + "'s input " + std::to_string(index) +
                            " must be " + what + " " + ShapeString(shape) +
                            " (the reference's); re-export the program with its reference");
  }
  return Outcome::Pass();
}

// Loads flags.model (with flags.data, if given) for `ref`: the caches the reference names, of
// its sizes, and a prefill that takes the reference's prompt (an encoder-decoder program: its
// encode method too, taking the reference's features, and prefill and decode taking its
// encoder states).
Outcome LoadProgram(const Flags& flags, const Reference& ref,
                    std::unique_ptr<PrefillDecodeProgram>* out) {
  const std::string& path = flags.model;
  std::vector<CacheBuffer> caches;
  for (const auto& spec : ref.caches) {
    caches.push_back({spec.name, spec.numel()});
  }
  std::string error;
  auto p = PrefillDecodeProgram::Load(path, caches, &error, ref.encoder_decoder, flags.data);
  if (!p.ok()) {
    return Outcome::Invalid(error);
  }
  // A prefill exported with a dynamic length is planned at its upper bound; a static one
  // at its only length (a prompt of another length then fails at set_input, named there).
  size_t longest = ref.prompt.size();
  for (const PromptRun& run : ref.prompts) {
    longest = std::max(longest, run.prompt.size());
  }
  const auto meta = (*p)->method_meta(Phase::kPrefill).input_tensor_meta(0);
  if (!meta.ok() || meta->sizes().size() != 2 || meta->sizes()[1] < static_cast<int64_t>(longest)) {
    return Outcome::Invalid(
        path + ": prefill's input_ids take at most [1, " +
        (meta.ok() && meta->sizes().size() == 2 ? std::to_string(meta->sizes()[1]) : "?") +
        "] but the reference has a prompt of " + std::to_string(longest) +
        " tokens: export prefill with a dynamic length up to it (torch.export.Dim), or "
        "re-export the program with its reference");
  }
  if (ref.encoder_decoder) {
    const Utterance& u = ref.utterances[0];
    for (const auto& [phase, index, shape, what] :
         {std::make_tuple(Phase::kEncode, size_t{0}, u.input_features.shape, "input_features"),
          std::make_tuple(Phase::kPrefill, size_t{2}, u.encoder_hidden_states.shape,
                          "encoder_hidden_states"),
          std::make_tuple(Phase::kDecode, size_t{2}, u.encoder_hidden_states.shape,
                          "encoder_hidden_states")}) {
      Outcome o = CheckInputShape(**p, phase, index, shape, path, what);
      if (!o.ok()) {
        return o;
      }
    }
  }
  *out = std::move(p.get());
  return Outcome::Pass();
}

// Runs step `step` of a conversation: prefill on `prompt` (step 0), else decode of
// `last_token` at position prompt length + step - 1, with `context` (the encoder states of an
// encoder-decoder program, else null). The last-position logits go to *logits.
Outcome RunStep(PrefillDecodeProgram* p, const std::vector<int64_t>& prompt, int step,
                int64_t last_token, const FloatTensor* context, std::vector<float>* logits,
                const std::string& where) {
  std::string error;
  const int64_t position = static_cast<int64_t>(prompt.size()) + step - 1;
  const Error err = step == 0 ? p->Prefill(prompt, logits, &error, context)
                              : p->Decode(last_token, position, logits, &error, context);
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
// `checksum_tol` of `want`'s (relative to the cache's scale, sum |x| resp. sum |x| w, not to
// the signed sum, which can be near zero). Sets row->max_dchecksum; a checksum outside the
// tolerance appends *row to *rows before failing.
Outcome CheckStepCaches(const PrefillDecodeProgram& p, const Reference& ref,
                        const ReferenceStep& want, const std::vector<const void*>& before,
                        double checksum_tol, const std::string& where, StepRow* row,
                        std::vector<StepRow>* rows) {
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

// The cross-attention caches as step 0 of an utterance left them.
struct CrossSnapshot {
  std::vector<std::vector<float>> contents;  // per cache of the reference (empty if self)
  std::vector<const void*> storage;
};

// Written once per utterance: step 0 wrote each cross cache exactly once (`writes`, the
// update_cross_attn_cache counter's delta; *snapshot records them), every later step wrote
// none and left each one's contents and storage as step 0 left them.
Outcome CheckCrossWrites(const PrefillDecodeProgram& p, const Reference& ref, int step,
                         uint64_t writes, const std::string& where, CrossSnapshot* snapshot) {
  const uint64_t expected = step == 0 ? ref.num_cross_caches() : 0;
  if (writes != expected) {
    if (step == 0) {
      return Outcome::Fail("the cross-attention caches were written " + std::to_string(writes) +
                           " times, expected " + std::to_string(expected) +
                           " (each cross cache once, by the utterance's first call), at " + where);
    }
    return Outcome::Fail(
        "the cross-attention caches were recomputed: " + std::to_string(writes) +
        " cache writes (update_cross_attn_cache), expected 0: a decode step must reuse the K/V "
        "its utterance's first call computed (torch.cond predicate (cache != 0).any()), at " +
        where);
  }
  if (step == 0) {
    snapshot->contents.assign(ref.caches.size(), {});
    snapshot->storage.assign(ref.caches.size(), nullptr);
  }
  for (size_t c = 0; c < ref.caches.size(); ++c) {
    if (!ref.caches[c].cross) {
      continue;
    }
    const Tensor& cache = p.cache(PhaseOfStep(step), c);
    const float* data = cache.const_data_ptr<float>();
    if (step == 0) {
      snapshot->contents[c].assign(data, data + cache.numel());
      snapshot->storage[c] = data;
      continue;
    }
    if (data != snapshot->storage[c]) {
      return Outcome::Fail("cross cache " + ref.caches[c].name +
                           " is no longer the storage step 0 wrote, at " + where);
    }
    if (std::memcmp(data, snapshot->contents[c].data(), snapshot->contents[c].size() * 4) != 0) {
      return Outcome::Fail("cross cache " + ref.caches[c].name +
                           " changed after step 0 (it must be written once per utterance), at " +
                           where);
    }
  }
  return Outcome::Pass();
}

// A new utterance, the caller's act: zeroes the cross-attention caches where the program
// holds them (the storage the runner found by name, or memory it bound).
void ZeroCrossCaches(PrefillDecodeProgram* p, const Reference& ref) {
  for (size_t c = 0; c < ref.caches.size(); ++c) {
    if (ref.caches[c].cross) {
      const Tensor& cache = p->cache(Phase::kDecode, c);
      std::memset(cache.mutable_data_ptr(), 0, cache.nbytes());
    }
  }
}

// Encode for utterance `u` (encoder-decoder): runs encode on its features into *states and
// compares them with the reference's encoder output within flags.tol.
Outcome EncodeUtterance(PrefillDecodeProgram* p, const Flags& flags, const Utterance& utterance,
                        const std::string& where, FloatTensor* states) {
  std::string error;
  if (p->Encode(utterance.input_features, states, &error) != Error::Ok) {
    return Outcome::Fail(error + ", at " + where);
  }
  const FloatTensor& want = utterance.encoder_hidden_states;
  if (states->shape != want.shape) {
    return Outcome::Fail("encode returned " + ShapeString(states->shape) + ", the reference " +
                         ShapeString(want.shape) + ", at " + where);
  }
  const double d = MaxAbsDiff(states->data, want.data);
  if (!LogitsWithin(d, want.data, flags.tol)) {
    return Outcome::Fail("the encoder output differs from the reference by " + std::to_string(d) +
                         " (tolerance " + std::to_string(flags.tol) + " x scale), at " + where);
  }
  if (!flags.quiet) {
    std::printf("  %-30s max|dstate| %.2e\n", where.c_str(), d);
  }
  return Outcome::Pass();
}

// One conversation a check runs against the reference: its prompt and reference steps (with
// the features of an encoder-decoder utterance), how rows label it (StepRow::utterance) and
// the prefix of its messages ("" names it by its steps alone).
struct Conversation {
  const std::vector<int64_t>& prompt;
  const Utterance& utterance;
  int label = -1;
  std::string who;
};

// Check 1 for utterance `u` of `ref`.
Conversation UtteranceConversation(const Reference& ref, size_t u) {
  return {ref.prompt, ref.utterances[u], UtteranceLabel(ref, u), ""};
}

// Check 1 (and 4) for one conversation on the loaded `p` (module comment of CheckRun).
Outcome RunConversation(PrefillDecodeProgram* p, const Flags& flags, const Reference& ref,
                        const Conversation& conversation, int steps,
                        const ProgramCopies& plan_copies, std::vector<StepRow>* rows) {
  const Utterance& utterance = conversation.utterance;
  const size_t u = static_cast<size_t>(std::max(conversation.label, 0));
  const int label = conversation.label;
  FloatTensor states;
  const FloatTensor* context = nullptr;
  uint64_t encode_delegate = 0;
  uint64_t encode_written_back = 0;
  if (ref.encoder_decoder) {
    const uint64_t copied_before = BytesCopied();
    Outcome o = EncodeUtterance(p, flags, utterance, "utterance " + std::to_string(u) + ", encode",
                                &states);
    if (!o.ok()) {
      return o;
    }
    encode_delegate = BytesCopied() - copied_before;
    encode_written_back = plan_copies.Find(PhaseName(Phase::kEncode))->BytesPerCall();
    context = &states;
  }
  CrossSnapshot snapshot;
  int64_t token = 0;
  for (int step = 0; step <= steps; ++step) {
    const ReferenceStep& want = utterance.steps[step];
    const std::string where = conversation.who.empty()
                                  ? StepName(label, step)
                                  : conversation.who + ", " + StepName(label, step);
    const Phase phase = PhaseOfStep(step);
    std::vector<const void*> before;
    for (size_t c = 0; c < p->num_caches(); ++c) {
      before.push_back(p->cache(phase, c).const_data_ptr());
    }
    std::vector<float> logits;
    const uint64_t cross_before = CrossAttnCacheUpdates();
    const uint64_t copied_before = BytesCopied();
    const auto t0 = std::chrono::steady_clock::now();
    Outcome o = RunStep(p, conversation.prompt, step, token, context, &logits, where);
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    if (!o.ok()) {
      return o;
    }
    const MethodCopies& write_backs = *plan_copies.Find(PhaseName(phase));
    StepRow row;
    row.utterance = label;
    row.step = step;
    row.token = Argmax(logits);
    row.ref_token = want.token;
    row.delegate_copied = BytesCopied() - copied_before + (step == 0 ? encode_delegate : 0);
    row.written_back = write_backs.BytesPerCall() + (step == 0 ? encode_written_back : 0);
    const uint64_t cross_writes = CrossAttnCacheUpdates() - cross_before;
    row.cross_writes = ref.encoder_decoder ? static_cast<int64_t>(cross_writes) : -1;
    row.ms = std::chrono::duration<double, std::milli>(elapsed).count();
    if (static_cast<int64_t>(logits.size()) != ref.vocab_size) {
      return Outcome::Fail("logits have " + std::to_string(logits.size()) +
                           " entries, the reference " + std::to_string(ref.vocab_size) + ", at " +
                           where);
    }
    row.max_dlogit = MaxAbsDiff(logits, want.logits);
    o = CheckStepCaches(*p, ref, want, before, flags.checksum_tol, where, &row, rows);
    if (!o.ok()) {
      return o;
    }
    rows->push_back(row);
    if (!flags.quiet) {
      PrintStepLine(where, row);
    }
    if (ref.encoder_decoder) {
      o = CheckCrossWrites(*p, ref, step, cross_writes, where, &snapshot);
      if (!o.ok()) {
        return o;
      }
    }
    if (!flags.allow_state_copies && row.state_copied() != 0) {
      const MethodCopies* encode =
          step == 0 && ref.encoder_decoder ? plan_copies.Find(PhaseName(Phase::kEncode)) : nullptr;
      std::string message =
          encode != nullptr && !encode->copies.empty()
              ? StateCopiesMessage("encode", encode_delegate, *encode, ref)
              : StateCopiesMessage(PhaseName(phase), row.delegate_copied, write_backs, ref);
      return Outcome::Fail(message + ", at " + where);
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

// One conversation of the sessions check: its prompt (and features per utterance), its own
// cache memory, and what it produced, flat over (utterance, step).
struct Session {
  int index = 0;
  std::vector<int64_t> prompt;
  std::vector<std::vector<float>> memory;  // one zeroed buffer per cache
  FloatTensor states;                      // the current utterance's encoder output
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};

Session NewSession(const Reference& ref, int index) {
  Session s;
  s.index = index;
  for (int64_t tok : ref.prompt) {
    s.prompt.push_back((tok + 7 * index) % ref.vocab_size);
  }
  for (const auto& spec : ref.caches) {
    s.memory.emplace_back(static_cast<size_t>(spec.numel()), 0.0f);
  }
  return s;
}

// Binds the session's memory, runs step `step` of its utterance `u` and records the result.
// An encoder-decoder session starts each utterance by zeroing its own cross caches and
// encoding the features of reference utterance (u + index) mod the utterance count.
Outcome StepSession(PrefillDecodeProgram* p, const Reference& ref, Session* s, size_t u, int step,
                    const std::string& who) {
  std::string error;
  if (p->BindCaches(&s->memory, &error) != Error::Ok) {
    return Outcome::Fail(error);
  }
  std::vector<float> logits;
  const std::string where = who + ", " + StepName(UtteranceLabel(ref, u), step);
  if (ref.encoder_decoder && step == 0) {
    for (size_t c = 0; c < ref.caches.size(); ++c) {
      if (ref.caches[c].cross) {
        std::fill(s->memory[c].begin(), s->memory[c].end(), 0.0f);
      }
    }
    const Utterance& utterance = ref.utterances[(u + s->index) % ref.utterances.size()];
    if (p->Encode(utterance.input_features, &s->states, &error) != Error::Ok) {
      return Outcome::Fail(error + ", at " + where);
    }
  }
  const int64_t last_token = step == 0 ? 0 : s->tokens.back();
  Outcome o = RunStep(p, s->prompt, step, last_token, ref.encoder_decoder ? &s->states : nullptr,
                      &logits, where);
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
  Outcome o = LoadProgram(flags, ref, &p);
  if (!o.ok()) {
    return o;
  }
  o = CheckKnownState(*p, ref);
  if (!o.ok()) {
    return o;
  }
  for (size_t u = 0; u < ref.utterances.size(); ++u) {
    if (u > 0) {
      ZeroCrossCaches(p.get(), ref);
      if (!flags.quiet) {
        std::printf(
            "  utterance %zu: the runner zeroes the %zu cross caches (a new utterance); the "
            "self caches keep the last utterance's rows\n",
            u, ref.num_cross_caches());
      }
    }
    // The self caches are not zeroed between utterances, so what an utterance's reference
    // checksums expect depends on how far the previous utterance ran: every utterance but
    // the last runs all of the reference's steps.
    const bool last = u + 1 == ref.utterances.size();
    if (!last && steps < ref.decode_steps() && !flags.quiet) {
      std::printf(
          "  utterance %zu runs all %d decode steps of the reference (--steps %d applies "
          "to the last utterance: the next one starts from this one's self caches)\n",
          u, ref.decode_steps(), steps);
    }
    o = RunConversation(p.get(), flags, ref, UtteranceConversation(ref, u),
                        last ? steps : ref.decode_steps(), plan_copies, rows);
    if (!o.ok()) {
      return o;
    }
  }
  return Outcome::Pass();
}

Outcome CheckPrompts(const Flags& flags, const Reference& ref, const ProgramCopies& plan_copies) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags, ref, &p);
  if (!o.ok()) {
    return o;
  }
  for (size_t k = 0; k < ref.prompts.size(); ++k) {
    const PromptRun& run = ref.prompts[k];
    // A new conversation: zeroed cache memory of its own, bound by name.
    std::vector<std::vector<float>> memory;
    for (const auto& spec : ref.caches) {
      memory.emplace_back(static_cast<size_t>(spec.numel()), 0.0f);
    }
    std::string error;
    if (p->BindCaches(&memory, &error) != Error::Ok) {
      return Outcome::Fail(error);
    }
    Utterance utterance;
    utterance.steps = run.steps;
    const std::string who = "prompt " + std::to_string(k) + " (" +
                            std::to_string(run.prompt.size()) +
                            (run.prompt.size() == 1 ? " token)" : " tokens)");
    std::vector<StepRow> rows;
    o = RunConversation(p.get(), flags, ref, {run.prompt, utterance, -1, who},
                        static_cast<int>(run.steps.size()) - 1, plan_copies, &rows);
    if (!o.ok()) {
      if (rows.empty()) {
        o.message +=
            " (a prefill exported with static shapes takes only its exported length: export it "
            "with a dynamic length, torch.export.Dim)";
      }
      return o;
    }
  }
  return Outcome::Pass();
}

Outcome CheckReload(const Flags& flags, const Reference& ref) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags, ref, &p);
  if (!o.ok()) {
    return o;
  }
  const Utterance& utterance = ref.utterances[0];
  FloatTensor states;
  std::string error;
  if (ref.encoder_decoder && p->Encode(utterance.input_features, &states, &error) != Error::Ok) {
    return Outcome::Fail(error + ", at reload encode");
  }
  std::vector<float> logits;
  o = RunStep(p.get(), ref.prompt, 0, 0, ref.encoder_decoder ? &states : nullptr, &logits,
              "reload, step 0 (prefill)");
  if (!o.ok()) {
    return o;
  }
  const ReferenceStep& want = utterance.steps[0];
  if (Argmax(logits) != want.token ||
      !LogitsWithin(MaxAbsDiff(logits, want.logits), want.logits, flags.tol)) {
    return Outcome::Fail(
        "a fresh reload does not reproduce the reference, at reload step 0 (prefill)");
  }
  return Outcome::Pass();
}

Outcome CheckSessions(const Flags& flags, const Reference& ref, int steps) {
  std::unique_ptr<PrefillDecodeProgram> p;
  Outcome o = LoadProgram(flags, ref, &p);
  if (!o.ok()) {
    return o;
  }
  const size_t utterances = ref.utterances.size();
  std::vector<Session> alone;
  std::vector<Session> interleaved;
  for (int k = 0; k < flags.sessions; ++k) {
    alone.push_back(NewSession(ref, k));
    for (size_t u = 0; u < utterances; ++u) {
      for (int step = 0; step <= steps; ++step) {
        o = StepSession(p.get(), ref, &alone[k], u, step,
                        "session " + std::to_string(k) + " alone");
        if (!o.ok()) {
          return o;
        }
      }
    }
    interleaved.push_back(NewSession(ref, k));
  }
  for (size_t u = 0; u < utterances; ++u) {
    for (int step = 0; step <= steps; ++step) {
      for (int k = 0; k < flags.sessions; ++k) {
        o = StepSession(p.get(), ref, &interleaved[k], u, step,
                        "session " + std::to_string(k) + " interleaved");
        if (!o.ok()) {
          return o;
        }
      }
    }
  }
  const size_t per_utterance = static_cast<size_t>(steps) + 1;
  for (int k = 0; k < flags.sessions; ++k) {
    for (size_t i = 0; i < utterances * per_utterance; ++i) {
      if (interleaved[k].tokens[i] != alone[k].tokens[i] ||
          MaxAbsDiff(interleaved[k].logits[i], alone[k].logits[i]) != 0.0) {
        return Outcome::Fail(
            "session " + std::to_string(k) + " interleaved differs from running alone, at " +
            StepName(UtteranceLabel(ref, i / per_utterance), static_cast<int>(i % per_utterance)));
      }
    }
  }
  for (size_t i = 0; !alone.empty() && i < utterances * per_utterance; ++i) {
    const size_t u = i / per_utterance;
    const int step = static_cast<int>(i % per_utterance);
    if (alone[0].tokens[i] != ref.utterances[u].steps[step].token) {
      return Outcome::Fail("session 0 (reference prompt, own memory) token " +
                           std::to_string(alone[0].tokens[i]) + " != reference " +
                           std::to_string(ref.utterances[u].steps[step].token) + ", at " +
                           StepName(UtteranceLabel(ref, u), step));
    }
  }
  if (!flags.quiet) {
    PrintSessionsLine(flags.sessions, static_cast<int>(utterances * per_utterance));
  }
  return Outcome::Pass();
}

}  // namespace executorch_trt::examples
