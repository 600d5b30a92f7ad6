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

TEST(StatsTest, RegisterFailuresSurviveTheWorkerPipeAndMerge) {
  RunSummary a;
  a.jobs = 4;
  a.registered = 1;
  a.register_failed = 3;
  a.register_failures["ERROR_CODE_RESOURCE_EXHAUSTED"] = {2, "quota of 1 job per key"};
  a.register_failures["TIMEOUT"] = {1, "no reply within 5000 ms"};
  a.assignments_stale = 2;
  a.state_resets = 1;
  a.stale_term_refused = 2;
  a.highest_term = 7;
  auto back = RunSummary::FromWireJson(a.ToWireJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->register_failed, 3);
  EXPECT_EQ(back->register_failures, a.register_failures);
  EXPECT_EQ(back->assignments_stale, 2u);
  EXPECT_EQ(back->state_resets, 1u);
  EXPECT_EQ(back->stale_term_refused, 2u);
  EXPECT_EQ(back->highest_term, 7u);

  RunSummary b;
  b.jobs = 2;
  b.register_failed = 2;
  b.register_failures["ERROR_CODE_RESOURCE_EXHAUSTED"] = {2, "another message"};
  a.Merge(b);
  EXPECT_EQ(a.register_failed, 5);
  EXPECT_EQ(a.register_failures["ERROR_CODE_RESOURCE_EXHAUSTED"].jobs, 4u);
  EXPECT_EQ(a.register_failures["ERROR_CODE_RESOURCE_EXHAUSTED"].example,
            "quota of 1 job per key");  // The first example is kept.
  const nlohmann::json j = a.ToJson();
  EXPECT_EQ(j["register_failed"], 5);
  EXPECT_EQ(j["register_failures"]["TIMEOUT"]["jobs"], 1);
  EXPECT_EQ(j["state_resets"], 1);

  nlohmann::json broken = b.ToWireJson();
  broken.erase("register_failures");
  EXPECT_FALSE(RunSummary::FromWireJson(broken).ok());
}

}  // namespace
}  // namespace crux::loadgen
