// Copyright (c) executorch-trt authors.
//
// step_stats.h: the summary decode.py reports for a list of step times, computed the way
// benchmarks/measure.py's `summarize` computes it (Python's `statistics.median` and
// `statistics.quantiles(n=10, method="inclusive")`, i.e. numpy's default linear
// interpolation), so the C++ and the Python columns of the table mean the same thing.

#pragma once

#include <vector>

namespace executorch_trt::benchmarks {

// Median, 10th and 90th percentile of a list of step times, in milliseconds.
struct StepSummary {
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
};

// The `q` quantile (0 <= q <= 1) of `values` (any order, not empty), linearly interpolated
// between the two closest ranks: sorted[(n - 1) * q]. One value is every quantile of itself.
double Quantile(std::vector<double> values, double q);

// Quantile 0.5, 0.1 and 0.9 of `step_ms` (not empty; milliseconds).
StepSummary Summarize(const std::vector<double>& step_ms);

}  // namespace executorch_trt::benchmarks
