// Copyright (c) executorch-trt authors.
//
// step_stats_test: Quantile/Summarize give what measure.summarize (Python's statistics.median
// and statistics.quantiles(n=10, method="inclusive")) gives on the same values.

#include "benchmarks/step_stats.h"

#include <gtest/gtest.h>

namespace executorch_trt::benchmarks {
namespace {

TEST(StepStatsTest, OneValueIsEveryQuantile) {
  const StepSummary s = Summarize({2.5});
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.p10_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.p90_ms, 2.5);
}

TEST(StepStatsTest, TwoValuesInterpolate) {
  // statistics.quantiles([1.0, 3.0], n=10, method="inclusive") -> [1.2, ..., 2.8]
  const StepSummary s = Summarize({3.0, 1.0});
  EXPECT_DOUBLE_EQ(s.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(s.p10_ms, 1.2);
  EXPECT_DOUBLE_EQ(s.p90_ms, 2.8);
}

TEST(StepStatsTest, MatchesPythonOnUnsortedValues) {
  // values = [5, 1, 4, 2, 3, 10, 7]: statistics.median -> 4,
  // statistics.quantiles(values, n=10, method="inclusive") -> p10 1.6, p90 8.2
  const StepSummary s = Summarize({5, 1, 4, 2, 3, 10, 7});
  EXPECT_DOUBLE_EQ(s.median_ms, 4.0);
  EXPECT_NEAR(s.p10_ms, 1.6, 1e-12);
  EXPECT_NEAR(s.p90_ms, 8.2, 1e-12);
  EXPECT_DOUBLE_EQ(Quantile({5, 1, 4, 2, 3, 10, 7}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Quantile({5, 1, 4, 2, 3, 10, 7}, 1.0), 10.0);
}

TEST(StepStatsTest, EvenCountMedianIsTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(Summarize({4, 1, 3, 2}).median_ms, 2.5);
}

}  // namespace
}  // namespace executorch_trt::benchmarks
