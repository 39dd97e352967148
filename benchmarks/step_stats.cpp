// Copyright (c) executorch-trt authors.

#include "benchmarks/step_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace executorch_trt::benchmarks {

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double rank = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

StepSummary Summarize(const std::vector<double>& step_ms) {
  return {Quantile(step_ms, 0.5), Quantile(step_ms, 0.1), Quantile(step_ms, 0.9)};
}

}  // namespace executorch_trt::benchmarks
