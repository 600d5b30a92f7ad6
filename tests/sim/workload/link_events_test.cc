// Link-event CSV: failures, degradations and recoveries resolved against a topology.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crux/sim/workload/link_events.h"
#include "crux/spec/topology_spec.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;

core::Topology Clos() {
  core::Result<core::Topology> t = spec::LoadTopologyFile(
      (std::filesystem::path(CRUX_SOURCE_DIR) / "configs/topologies/example_clos2.yaml").string());
  EXPECT_TRUE(t.ok());
  return *t;
}

TEST(LinkEventsTest, ParsesEventsOntoLinks) {
  const core::Topology t = Clos();
  core::Result<std::vector<LinkEvent>> ev = ParseLinkEventsCsv(
      "# failures\ntime_s,a,b,gbps\r\n3600,tor3,agg1,0\n5400.5, tor3 , agg1 ,400\n"
      "7200,host5/nic0,tor1,100",
      t);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_EQ(ev->size(), 3u);
  EXPECT_EQ((*ev)[0].at, core::Duration::Seconds(3600));
  EXPECT_EQ(t.LinkName((*ev)[0].link), "tor3 -> agg1");
  EXPECT_EQ((*ev)[0].capacity, core::Bandwidth::Gbps(0));
  EXPECT_EQ((*ev)[1].at, core::Duration::Millis(5400500));
  EXPECT_EQ((*ev)[1].capacity, core::Bandwidth::Gbps(400));
  EXPECT_EQ(t.LinkName((*ev)[2].link), "host5/nic0 -> tor1");
}

// Found by fuzz/link_events_csv (reproducer fuzz/corpus/link_events_csv/repro_huge_gbps.csv): a
// speed too large for core::Bandwidth's int64 bit/s was accepted and became a negative capacity.
TEST(LinkEventsTest, RefusesSpeedsBeyondTheBuildersLimit) {
  const core::Topology t = Clos();
  for (const char* gbps : {"1e10", "3.3e70", "1.8e308"}) {
    core::Result<std::vector<LinkEvent>> r = ParseLinkEventsCsv(
        std::string(kLinkEventsHeader) + "\n3200,host5/nic0,tor1," + gbps + "\n", t);
    ASSERT_FALSE(r.ok()) << gbps;
    EXPECT_THAT(r.status().message(),
                HasSubstr("line 2, column 4 (gbps): must be a finite number >= 0 and <= 1e+09"))
        << gbps;
  }
  core::Result<std::vector<LinkEvent>> top =
      ParseLinkEventsCsv(std::string(kLinkEventsHeader) + "\n3200,host5/nic0,tor1,1e9\n", t);
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ((*top)[0].capacity, core::Bandwidth::Gbps(1e9));
  EXPECT_TRUE((*top)[0].capacity.IsPositive());
}

TEST(LinkEventsTest, RejectsBadLinesWithLineAndColumn) {
  const core::Topology t = Clos();
  struct Case {
    const char* row;
    const char* error;
  };
  const Case cases[] = {
      {"1,tor0,agg0", "line 2: expected 4 comma-separated fields (got 3)"},
      {"-1,tor0,agg0,0", "line 2, column 1 (time_s): must be a finite number >= 0"},
      {"nan,tor0,agg0,0", "line 2, column 1 (time_s)"},
      {"1,tor9,agg0,0", "line 2, column 2 (a): unknown node 'tor9'"},
      {"1,tor0,agg7,0", "line 2, column 3 (b): unknown node 'agg7'"},
      {"1,tor0,tor1,0", "line 2, column 3 (b): no link between 'tor0' and 'tor1'"},
      {"1,tor0,agg0,-5", "line 2, column 4 (gbps): must be a finite number >= 0"},
      {"1,tor0,agg0,fast", "line 2, column 4 (gbps)"},
  };
  for (const Case& c : cases) {
    core::Result<std::vector<LinkEvent>> r =
        ParseLinkEventsCsv(std::string(kLinkEventsHeader) + "\n" + c.row + "\n", t);
    ASSERT_FALSE(r.ok()) << c.row;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.row;
  }
  EXPECT_THAT(ParseLinkEventsCsv("", t).status().message(), HasSubstr("missing the header"));
  EXPECT_THAT(ParseLinkEventsCsv("t,a,b\n", t).status().message(),
              HasSubstr("expected the header"));
  EXPECT_THAT(LoadLinkEventsFile("/nonexistent/e.csv", t).status().message(),
              HasSubstr("/nonexistent/e.csv: cannot open"));
}

}  // namespace
}  // namespace crux::sim::workload
