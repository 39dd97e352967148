// Copyright (c) executorch-trt authors.
//
// runner_report.h: what the runners (kv_cache_decode_check, cross_attn_decode_check) print
// (progress lines, the per-step table, the delegates and the write-backs of each method) and
// their message for a step that copied state.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "examples/plan_copies.h"
#include "examples/plan_delegates.h"
#include "examples/reference.h"

namespace executorch_trt::examples {

// One checked step of the run check: a row of the table.
struct StepRow {
  int utterance = -1;  // encoder-decoder programs: which utterance; -1: decoder-only
  int step = 0;
  int64_t token = 0;
  int64_t ref_token = 0;
  double max_dlogit = 0;
  double max_dchecksum = 0;      // relative to the cache's scale
  uint64_t delegate_copied = 0;  // the delegate's copy counter across this execute
  uint64_t written_back = 0;     // ExecuTorch's write-backs per call of the method (its plan)
  // Encoder-decoder programs: cross-attention cache writes during this step (the recompute
  // branch's update_cross_attn_cache calls); -1: decoder-only.
  int64_t cross_writes = -1;
  double ms = 0;
  // Every byte of state this step copied.
  uint64_t state_copied() const { return delegate_copied + written_back; }
};

// One line per method of `methods`: its delegates and the engine that runs each, e.g.
// "  decode: 1 TensorRTBackend delegate, engine portable (nested ExecuTorch program with
// XNNPACK, on the CPU)" (MethodDelegates::Describe), from the program file.
void PrintDelegates(const ProgramDelegates& delegates, const std::vector<std::string>& methods);

// One line per method of `methods`: what ExecuTorch writes back per call, from the plan.
// `plan_copies` must have every method of `methods`.
void PrintWriteBacks(const ProgramCopies& plan_copies, const std::vector<std::string>& methods);

// The progress line of one step of the run check; `where` names the step.
void PrintStepLine(const std::string& where, const StepRow& row);

// The sessions check's summary: `sessions` conversations of `steps_each` steps agreed.
void PrintSessionsLine(int sessions, int steps_each);

// The per-step table (with utterance and cross-write columns if the rows have them) and the
// state-copies summary line.
void PrintTable(const std::vector<StepRow>& rows, bool allow_state_copies);

// Encoder-decoder programs: the summary line of the cross-attention caches' writes over
// `rows` (`cross_caches` caches, each written at step 0 of every utterance).
void PrintCrossWrites(const std::vector<StepRow>& rows, size_t cross_caches);

// The in-place check's failure: what `method` copied in one call (`delegate_bytes` by the
// delegate, `write_backs` by ExecuTorch) and what to do about it.
std::string StateCopiesMessage(const std::string& method, uint64_t delegate_bytes,
                               const MethodCopies& write_backs, const Reference& ref);

}  // namespace executorch_trt::examples
