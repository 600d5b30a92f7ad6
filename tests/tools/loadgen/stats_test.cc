#include "crux/loadgen/stats.h"

#include <gtest/gtest.h>

namespace crux::loadgen {
namespace {

TEST(StatsTest, NearestRankPercentiles) {
  LatencyRecorder r;
  EXPECT_EQ(r.Percentile(50), 0);
  for (int64_t v : {4, 1, 3, 2}) r.Add(v);
  EXPECT_EQ(r.Percentile(50), 2);
  EXPECT_EQ(r.Percentile(75), 3);
  EXPECT_EQ(r.Percentile(100), 4);
  EXPECT_EQ(r.Percentile(0), 1);
  EXPECT_DOUBLE_EQ(r.MeanNs(), 2.5);

  LatencyRecorder big;
  for (int64_t v = 1; v <= 1000; ++v) big.Add(v * 1000000);  // 1..1000 ms.
  EXPECT_EQ(big.Percentile(99), 990 * 1000000);
  nlohmann::json j = big.ToJson();
  EXPECT_EQ(j["samples"], 1000);
  EXPECT_DOUBLE_EQ(j["p50_ms"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(j["p99_ms"].get<double>(), 990.0);
  EXPECT_DOUBLE_EQ(j["max_ms"].get<double>(), 1000.0);
  big.Add(1);  // Adding after a percentile re-sorts.
  EXPECT_EQ(big.Percentile(0), 1);
}

TEST(StatsTest, SummaryRateUsesTheWindow) {
  RunSummary s;
  s.jobs = 3;
  s.registered = 3;
  s.reports_acked = 1500;
  s.reports_acked_in_window = 1000;
  s.duration_s = 2.0;
  s.errors["ERROR_CODE_UNKNOWN_HOST"] = 2;
  EXPECT_DOUBLE_EQ(s.ReportRate(), 500.0);
  nlohmann::json j = s.ToJson();
  EXPECT_EQ(j["jobs"], 3);
  EXPECT_DOUBLE_EQ(j["report_rate_per_s"].get<double>(), 500.0);
  EXPECT_EQ(j["errors"]["ERROR_CODE_UNKNOWN_HOST"], 2);
  EXPECT_TRUE(j.contains("push_latency"));
  RunSummary empty;
  EXPECT_DOUBLE_EQ(empty.ReportRate(), 0.0);
}

}  // namespace
}  // namespace crux::loadgen
