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

void PrintWriteBacks(const ProgramCopies& plan_copies) {
  for (const char* method : {"prefill", "decode"}) {
    const MethodCopies& m = *plan_copies.Find(method);
    const bool any = !m.copies.empty();
    std::printf("  %s: ExecuTorch writes back %llu bytes per call%s%s%s%s\n", method,
                Ull(m.BytesPerCall()), any ? " (" : "", ListWriteBacks(m).c_str(), any ? ")" : "",
                ExactnessNote(m).c_str());
  }
}

void PrintStepLine(const std::string& where, const StepRow& row) {
  std::printf(
      "  %-18s token %5lld (ref %5lld)  max|dlogit| %.2e  cache ok  state copied %6llu B  "
      "%8.2f ms\n",
      where.c_str(), static_cast<long long>(row.token), static_cast<long long>(row.ref_token),
      row.max_dlogit, Ull(row.state_copied()), row.ms);
  std::fflush(stdout);
}

void PrintSessionsLine(int sessions, int steps_each) {
  std::printf("  %d sessions, %d steps each: interleaved == alone, session 0 == reference\n",
              sessions, steps_each);
}

void PrintTable(const std::vector<StepRow>& rows, bool allow_state_copies) {
  std::printf(
      "\n  step  token  ref    max|dlogit|  max rel dchecksum  state bytes copied  "
      "(delegate + write-back)  latency ms\n");
  uint64_t delegate = 0;
  uint64_t written_back = 0;
  for (const auto& r : rows) {
    std::printf("  %4d  %5lld  %5lld  %11.2e  %17.2e  %18llu  (%8llu + %10llu)  %10.2f\n", r.step,
                static_cast<long long>(r.token), static_cast<long long>(r.ref_token), r.max_dlogit,
                r.max_dchecksum, Ull(r.state_copied()), Ull(r.delegate_copied), Ull(r.written_back),
                r.ms);
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
