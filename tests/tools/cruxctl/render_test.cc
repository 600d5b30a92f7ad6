// cruxctl rendering: tables, human units and the documented JSON keys.
#include "render.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace crux::cruxctl {
namespace {

std::set<std::string> Keys(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

v1::JobSummary Summary(const std::string& id, int rank, int level) {
  v1::JobSummary j;
  j.set_job_id(id);
  j.set_tenant("team-a");
  j.set_state(v1::JOB_STATE_SCHEDULED);
  j.set_gpus(16);
  j.set_hosts(2);
  j.set_intensity(1.5e14);
  j.set_k(0.8);
  j.set_priority(1.2e14);
  j.set_rank(rank);
  j.set_level(level);
  j.set_dscp(26);
  j.set_epoch(7);
  j.set_period_ms(250);
  j.set_samples(20);
  j.set_last_seen_ms(1764480000000);
  return j;
}

TEST(TableTest, AlignsTextLeftAndNumbersRight) {
  Table table({{"NAME"}, {"COUNT", true}});
  table.AddRow({"alpha", "5"});
  table.AddRow({"b", "1234567"});
  const auto lines = Lines(table.Render());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "NAME     COUNT");
  EXPECT_EQ(lines[1], "alpha        5");
  EXPECT_EQ(lines[2], "b      1234567");
}

TEST(TableTest, EmptyTableSaysNone) {
  Table table({{"A"}, {"B"}});
  EXPECT_EQ(table.Render(), "A  B\n(none)\n");
}

TEST(FormatTest, SiPrefixesAndUnits) {
  EXPECT_EQ(FormatSi(1.5e14, "FLOP/s"), "150T FLOP/s");
  EXPECT_EQ(FormatSi(1e11, "b/s"), "100G b/s");
  EXPECT_EQ(FormatSi(999.96e9, "b/s"), "1T b/s");
  EXPECT_EQ(FormatSi(12.0, "b/s"), "12 b/s");
  EXPECT_EQ(FormatSi(0.0, ""), "0");
  EXPECT_EQ(FormatSi(std::numeric_limits<double>::infinity(), "x"), "inf x");
  EXPECT_EQ(FormatSi(3.57e22, "FLOP/s"), "3.57e+22 FLOP/s");
  EXPECT_EQ(FormatSi(-2.5e9, ""), "-2.5G");
}

TEST(FormatTest, Millis) {
  EXPECT_EQ(FormatMillis(12.34), "12.3ms");
  EXPECT_EQ(FormatMillis(4560), "4.56s");
  EXPECT_EQ(FormatMillis(3720000), "1h02m");
}

TEST(FormatTest, EnumWords) {
  EXPECT_EQ(LinkHealthName(v1::LINK_HEALTH_DEGRADED), "degraded");
  EXPECT_EQ(LinkHealthName(v1::LINK_HEALTH_UNSPECIFIED), "unspecified");
}

TEST(JsonTest, StatusHasDocumentedKeysAndValues) {
  v1::StatusReply r;
  r.set_version("0.1.0");
  r.set_epoch(42);
  r.set_jobs(3);
  (*r.mutable_jobs_by_state())["scheduled"] = 2;
  (*r.mutable_jobs_by_state())["profiling"] = 1;
  r.set_last_replan_ms(1.25);
  r.set_dry_run(true);
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(Keys(j), (std::set<std::string>{"version", "uptime_ms", "epoch", "jobs",
                                            "jobs_by_state", "clients", "switches", "hosts",
                                            "links", "links_not_up", "levels", "dry_run", "replans",
                                            "last_replan_ms", "topology", "state_path"}));
  EXPECT_EQ(j["epoch"], 42);
  EXPECT_TRUE(j["epoch"].is_number_unsigned());
  EXPECT_EQ(j["jobs_by_state"]["scheduled"], 2);
  EXPECT_EQ(j["jobs_by_state"]["profiling"], 1);
  EXPECT_DOUBLE_EQ(j["last_replan_ms"].get<double>(), 1.25);
  EXPECT_EQ(j["dry_run"], true);
}

TEST(JsonTest, JobsListEnumsAreWords) {
  v1::ListJobsReply reply;
  *reply.add_jobs() = Summary("a", 0, 1);
  *reply.add_jobs() = Summary("b", 1, 2);
  reply.mutable_jobs(1)->set_state(v1::JOB_STATE_PROFILING);
  const nlohmann::json j = ToJson(reply);
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(Keys(j["jobs"][0]),
            (std::set<std::string>{"job_id", "tenant", "state", "gpus", "hosts", "intensity", "k",
                                   "priority", "rank", "level", "dscp", "epoch", "period_ms",
                                   "samples", "last_seen_ms"}));
  EXPECT_EQ(j["jobs"][0]["state"], "scheduled");
  EXPECT_EQ(j["jobs"][1]["state"], "profiling");
  EXPECT_EQ(j["jobs"][1]["level"], 2);
  EXPECT_DOUBLE_EQ(j["jobs"][0]["intensity"].get<double>(), 1.5e14);
}

v1::JobDetail Detail() {
  v1::JobDetail d;
  *d.mutable_summary() = Summary("llm", 1, 2);
  d.add_hosts("host0");
  d.add_hosts("host1");
  d.set_work_flops(3e16);
  d.set_comm_time_ms(200);
  d.set_bottleneck("tor0->agg1");
  d.set_explanation("ranks below job vision on tor0->agg1; levels 1-2 hold 3 jobs");
  v1::FlowDetail* f = d.add_flows();
  f->set_src_nic("host0/nic0");
  f->set_dst_nic("host1/nic0");
  f->set_bytes(3 * 1024 * 1024);
  f->set_udp_sport(49153);
  f->add_path("host0/nic0");
  f->add_path("tor0");
  f->add_path("agg1");
  f->add_path("tor1");
  f->add_path("host1/nic0");
  f->set_num_paths(4);
  v1::Contention* c = d.add_contends_with();
  c->set_other_job("vision");
  c->add_links("tor0->agg1");
  c->add_links("agg1->tor1");
  c->set_weight(2.5e13);
  c->set_above(true);
  return d;
}

TEST(JsonTest, JobDetailNestsSummaryFlowsAndContention) {
  const nlohmann::json j = ToJson(Detail());
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"summary", "hosts", "work_flops", "comm_time_ms", "bottleneck",
                                   "reference", "model", "explanation", "flows", "contends_with"}));
  EXPECT_EQ(j["summary"]["job_id"], "llm");
  EXPECT_EQ(j["hosts"], nlohmann::json::array({"host0", "host1"}));
  ASSERT_EQ(j["flows"].size(), 1u);
  EXPECT_EQ(j["flows"][0]["udp_sport"], 49153);
  EXPECT_EQ(j["flows"][0]["path"].size(), 5u);
  EXPECT_EQ(j["flows"][0]["num_paths"], 4);
  ASSERT_EQ(j["contends_with"].size(), 1u);
  EXPECT_EQ(j["contends_with"][0]["other_job"], "vision");
  EXPECT_EQ(j["contends_with"][0]["links"], nlohmann::json::array({"tor0->agg1", "agg1->tor1"}));
  EXPECT_EQ(j["contends_with"][0]["above"], true);
}

TEST(TextTest, JobDetailExplainsEverything) {
  const std::string text = RenderJobDetailText(Detail());
  for (const char* needle :
       {"Job llm (tenant team-a): scheduled", "16 GPUs on 2 hosts: host0, host1", "150T FLOP/s",
        "W_j 30P FLOP", "t_j 200ms", "bottleneck tor0->agg1", "k_j            0.8",
        "1 / 2 (0 = highest)", "DSCP 26", "Why level 2:", "ranks below job vision",
        "host0/nic0 > tor0 > agg1 > tor1 > host1/nic0", "49153", "3MiB", "vision", "above",
        "tor0->agg1, agg1->tor1"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << "missing \"" << needle << "\" in:\n" << text;
  }
}

TEST(TextTest, LongContentionLinkListsAreShortenedInTextOnly) {
  v1::JobDetail d = Detail();
  v1::Contention* c = d.mutable_contends_with(0);
  for (int i = 0; i < 10; ++i) c->add_links("l" + std::to_string(i));  // 12 links in all.
  const std::string text = RenderJobDetailText(d);
  EXPECT_NE(text.find("l3, ... (+6 more, see --json)"), std::string::npos) << text;
  EXPECT_EQ(text.find("l4"), std::string::npos) << text;
  EXPECT_EQ(ToJson(d)["contends_with"][0]["links"].size(), 12u);
}

TEST(TextTest, JobsTableHasOneRowPerJob) {
  v1::ListJobsReply reply;
  *reply.add_jobs() = Summary("a", 0, 1);
  *reply.add_jobs() = Summary("b", -1, -1);
  const auto lines = Lines(RenderJobsTable(reply));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("JOB", 0), 0u);
  EXPECT_NE(lines[1].find("150T FLOP/s"), std::string::npos);
  EXPECT_EQ(lines[2].rfind("b ", 0), 0u);
  EXPECT_NE(lines[2].find(" - "), std::string::npos);  // Unranked job: "-" for rank/level.
}

TEST(TextTest, LinksAndSetLink) {
  v1::ListLinksReply reply;
  v1::LinkInfo* l = reply.add_links();
  l->set_name("tor0->agg1");
  l->set_health(v1::LINK_HEALTH_DEGRADED);
  l->set_capacity_bps(50e9);
  l->set_nominal_bps(100e9);
  l->set_load_bps(40e9);
  l->set_utilization(0.8);
  l->set_jobs(2);
  const std::string text = RenderLinksTable(reply);
  EXPECT_NE(text.find("tor0->agg1  degraded"), std::string::npos) << text;
  EXPECT_NE(text.find("50G b/s"), std::string::npos);
  EXPECT_NE(text.find("80.0%"), std::string::npos);
  const nlohmann::json j = ToJson(reply);
  EXPECT_EQ(j["links"][0]["health"], "degraded");
  EXPECT_EQ(Keys(j["links"][0]),
            (std::set<std::string>{"name", "health", "capacity_bps", "nominal_bps", "load_bps",
                                   "utilization", "jobs"}));
  v1::SetLinkReply set;
  *set.add_changed() = *l;
  EXPECT_EQ(ToJson(set)["changed"][0]["name"], "tor0->agg1");
  EXPECT_EQ(RenderSetLinkText(set).rfind("Changed 1 link(s):", 0), 0u);
}

TEST(TextTest, PlanDryRunAndSwitches) {
  v1::PlanDryRunReply plan;
  plan.set_replan_ms(3.5);
  v1::PlanChange* c = plan.add_changes();
  c->set_job_id("a");
  c->set_old_level(1);
  c->set_new_level(3);
  c->set_flows_repinned(2);
  EXPECT_NE(RenderPlanDryRunText(plan).find("1 job(s) would change"), std::string::npos);
  const nlohmann::json pj = ToJson(plan);
  EXPECT_EQ(pj["changes"][0]["new_level"], 3);
  EXPECT_DOUBLE_EQ(pj["replan_ms"].get<double>(), 3.5);

  v1::ListSwitchesReply sw;
  v1::SwitchInfo* s = sw.add_switches();
  s->set_name("tor0");
  s->set_connected(true);
  s->set_desired_epoch(9);
  s->set_applied_epoch(8);
  s->set_last_error("queue 7 busy");
  const std::string text = RenderSwitchesTable(sw);
  EXPECT_NE(text.find("tor0"), std::string::npos);
  EXPECT_NE(text.find("queue 7 busy"), std::string::npos);
  const nlohmann::json sj = ToJson(sw);
  EXPECT_EQ(sj["switches"][0]["applied_epoch"], 8);
  EXPECT_EQ(sj["switches"][0]["connected"], true);
}

}  // namespace
}  // namespace crux::cruxctl
