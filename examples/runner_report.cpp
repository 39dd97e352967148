// Copyright (c) executorch-trt authors.

#include "examples/runner_report.h"

#include <cstdio>

namespace executorch_trt::examples {
namespace {

unsigned long long Ull(uint64_t n) { return static_cast<unsigned long long>(n); }

// "'key_cache_0' 16384 B, 'value_cache_0' 16384 B": each write-back of `method`.
std::string ListWriteBacks(const MethodCopies& method) {
  std::string list;
  for (const auto& copy : method.copies) {
    list += (list.empty() ? "" : ", ") + copy.DestinationLabel() + " " +
            std::to_string(copy.bytes) + " B";
    if (copy.op != "aten::copy_") {
      list += " (" + copy.op + ")";
    }
  }
  return list;
}

// " (an estimate: ...)" when the plan's per-call figure is not exact, else "".
std::string ExactnessNote(const MethodCopies& method) {
  return method.exact ? ""
                      : " (an estimate: the plan has control flow or dynamic shapes, so a copy "
                        "may run more or less than once per call)";
}

}  // namespace

void PrintDelegates(const ProgramDelegates& delegates, const std::vector<std::string>& methods) {
  for (const std::string& method : methods) {
    const MethodDelegates* m = delegates.Find(method);
    std::printf("  %s: %s\n", method.c_str(),
                m == nullptr ? "not in the program" : m->Describe().c_str());
  }
}

void PrintWriteBacks(const ProgramCopies& plan_copies, const std::vector<std::string>& methods) {
  for (const std::string& method : methods) {
    const MethodCopies& m = *plan_copies.Find(method);
    const bool any = !m.copies.empty();
    std::printf("  %s: ExecuTorch writes back %llu bytes per call%s%s%s%s\n", method.c_str(),
                Ull(m.BytesPerCall()), any ? " (" : "", ListWriteBacks(m).c_str(), any ? ")" : "",
                ExactnessNote(m).c_str());
  }
}

void PrintStepLine(const std::string& where, const StepRow& row) {
  const std::string cross =
      row.cross_writes < 0 ? "" : "  cross K/V writes " + std::to_string(row.cross_writes);
  std::printf(
      "  %-*s token %5lld (ref %5lld)  max|dlogit| %.2e  cache ok%s  state copied %6llu B  "
      "%8.2f ms\n",
      row.utterance < 0 ? 18 : 30, where.c_str(), static_cast<long long>(row.token),
      static_cast<long long>(row.ref_token), row.max_dlogit, cross.c_str(), Ull(row.state_copied()),
      row.ms);
  std::fflush(stdout);
}

void PrintSessionsLine(int sessions, int steps_each) {
  std::printf("  %d sessions, %d steps each: interleaved == alone, session 0 == reference\n",
              sessions, steps_each);
}

void PrintTable(const std::vector<StepRow>& rows, bool allow_state_copies) {
  const bool encoder_decoder = !rows.empty() && rows[0].utterance >= 0;
  std::printf(
      "\n  %sstep  token  ref    max|dlogit|  max rel dchecksum  %sstate bytes copied  "
      "(delegate + write-back)  latency ms\n",
      encoder_decoder ? "utt  " : "", encoder_decoder ? "cross K/V writes  " : "");
  uint64_t delegate = 0;
  uint64_t written_back = 0;
  for (const auto& r : rows) {
    std::printf("  ");
    if (encoder_decoder) {
      std::printf("%3d  ", r.utterance);
    }
    std::printf("%4d  %5lld  %5lld  %11.2e  %17.2e  ", r.step, static_cast<long long>(r.token),
                static_cast<long long>(r.ref_token), r.max_dlogit, r.max_dchecksum);
    if (encoder_decoder) {
      std::printf("%16lld  ", static_cast<long long>(r.cross_writes));
    }
    std::printf("%18llu  (%8llu + %10llu)  %10.2f\n", Ull(r.state_copied()), Ull(r.delegate_copied),
                Ull(r.written_back), r.ms);
    delegate += r.delegate_copied;
    written_back += r.written_back;
  }
  const char* verdict = delegate + written_back == 0 ? ": every update in place"
                        : allow_state_copies         ? ", allowed by --allow-state-copies"
                                                     : "";
  std::printf(
      "\n  state bytes copied in %zu step%s: %llu (delegate %llu + ExecuTorch write-back "
      "%llu)%s\n\n",
      rows.size(), rows.size() == 1 ? "" : "s", Ull(delegate + written_back), Ull(delegate),
      Ull(written_back), verdict);
}

void PrintCrossWrites(const std::vector<StepRow>& rows, size_t cross_caches) {
  long long at_prefill = 0;
  long long at_decode = 0;
  int utterances = 0;
  int decode_steps = 0;
  for (const auto& r : rows) {
    if (r.step == 0) {
      at_prefill += r.cross_writes;
      ++utterances;
    } else {
      at_decode += r.cross_writes;
      ++decode_steps;
    }
  }
  const bool once = at_prefill == static_cast<long long>(cross_caches) * utterances;
  std::printf(
      "  cross-attention caches: %lld writes at step 0 of %d utterance%s (%zu caches%s), %lld in "
      "%d decode steps%s\n\n",
      at_prefill, utterances, utterances == 1 ? "" : "s", cross_caches,
      once ? ", each written once" : "", at_decode, decode_steps,
      at_decode == 0 ? " (reused)" : " (recomputed)");
}

std::string StateCopiesMessage(const std::string& method, uint64_t delegate_bytes,
                               const MethodCopies& write_backs, const Reference& ref) {
  std::string m = method + " copies state:";
  if (!write_backs.copies.empty()) {
    m += " ExecuTorch writes back " + std::to_string(write_backs.BytesPerCall()) +
         " bytes per call (" + ListWriteBacks(write_backs) + ")" + ExactnessNote(write_backs);
  }
  if (delegate_bytes != 0) {
    m += std::string(write_backs.copies.empty() ? "" : ";") + " the delegate copied " +
         std::to_string(delegate_bytes) +
         " bytes (its aliased outputs are not the buffers themselves)";
  }
  m += "; a program that updates its state in place copies none";
  if (ref.kv_cache == "copy_back") {
    m += " (the reference says this program was exported with kv_cache=\"copy_back\")";
  }
  return m + ": run with --allow-state-copies to check such a program for correctness only";
}

}  // namespace executorch_trt::examples
