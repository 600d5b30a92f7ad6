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

#include "crux/core/base/text.h"
#include "crux/core/plan/priority.h"

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
  EXPECT_EQ(Keys(j), (std::set<std::string>{"version",
                                            "uptime_ms",
                                            "epoch",
                                            "jobs",
                                            "jobs_by_state",
                                            "clients",
                                            "switches",
                                            "hosts",
                                            "links",
                                            "links_not_up",
                                            "levels",
                                            "dry_run",
                                            "replans",
                                            "last_replan_ms",
                                            "topology",
                                            "state_path",
                                            "store_ok",
                                            "store_error",
                                            "state_id",
                                            "refusals",
                                            "quarantined_jobs",
                                            "loop_lag_p99_ms",
                                            "loop_lag_max_ms"}));
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
  EXPECT_EQ(
      Keys(j["jobs"][0]),
      (std::set<std::string>{"job_id", "tenant", "state", "gpus", "hosts", "intensity", "k",
                             "priority", "rank", "level", "dscp", "epoch", "period_ms", "samples",
                             "last_seen_ms", "predicted_ms", "ecmp_ms", "observed_ms", "gain"}));
  // No prediction, no observation: null, not 0.
  EXPECT_TRUE(j["jobs"][0]["predicted_ms"].is_null());
  EXPECT_TRUE(j["jobs"][0]["observed_ms"].is_null());
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
                                   "reference", "model", "explanation", "flows", "contends_with",
                                   "faults", "pair_gain", "pair_loss", "reference_job"}));
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

TEST(TextTest, MultiHostJobShowsItsPartsAndTheMerge) {
  v1::JobDetail d = Detail();
  EXPECT_EQ(RenderJobDetailText(d).find("Host parts"), std::string::npos) << "a whole job";
  EXPECT_FALSE(ToJson(d).contains("parts"));
  for (const char* host : {"host0", "host1"}) {
    v1::JobPart* p = d.add_parts();
    p->set_host(host);
    p->set_local_ranks(8);
    p->set_hosts_expected(2);
    p->set_connected(std::string(host) == "host0");
    p->set_last_seen_ms(1764000000000);
    p->set_acked_epoch(7);
    p->set_samples(std::string(host) == "host0" ? 12 : 0);
    p->set_period_ms(100);
  }
  v1::JobMerge* m = d.mutable_merge();
  m->set_parts(2);
  m->set_parts_reporting(1);
  m->set_hosts_expected(2);
  m->set_cross_host_bytes(300 << 20);
  m->set_unattributed_bytes(150 << 20);
  m->set_conflicting_ranks(1);
  const std::string text = RenderJobDetailText(d);
  for (const char* needle :
       {"Host parts (2 of 2 hosts expected; 1 reporting; merge incomplete)", "not connected",
        "connected", "300MiB between hosts", "150MiB to ranks of no reporting part",
        "1 ranks claimed by two parts"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << "missing \"" << needle << "\" in:\n" << text;
  }
  const nlohmann::json j = ToJson(d);
  ASSERT_EQ(j["parts"].size(), 2u);
  EXPECT_EQ(j["parts"][0]["host"], "host0");
  EXPECT_EQ(j["parts"][1]["connected"], false);
  EXPECT_EQ(j["merge"]["complete"], false);
  EXPECT_EQ(j["merge"]["unattributed_bytes"], 150u << 20);
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

TEST(TextTest, JobsTableShowsPredictionObservationAndGain) {
  v1::ListJobsReply reply;
  v1::JobSummary* a = reply.add_jobs();
  *a = Summary("a", 0, 1);
  a->set_has_prediction(true);
  a->set_predicted_ms(120);
  a->set_ecmp_ms(150);
  a->set_gain(0.2);
  a->set_observed_ms(125);
  *reply.add_jobs() = Summary("b", 1, 2);  // Nothing predicted or observed.
  const std::string text = RenderJobsTable(reply);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_NE(lines[0].find("PRED"), std::string::npos) << text;
  EXPECT_NE(lines[0].find("OBS"), std::string::npos) << text;
  EXPECT_NE(lines[0].find("GAIN"), std::string::npos) << text;
  EXPECT_NE(lines[1].find("+20.0%"), std::string::npos) << text;
  EXPECT_NE(lines[1].find("125ms"), std::string::npos) << text;
  EXPECT_EQ(lines[2].find('%'), std::string::npos) << text;
}

TEST(TextTest, ImpactSaysWhatThePlanGainsAndWhereTheModelIsWrong) {
  v1::ImpactReply r;
  EXPECT_NE(RenderImpactText(r).find("no prediction yet"), std::string::npos);
  r.set_error("impact: no spec for job 'x'");
  EXPECT_NE(RenderImpactText(r).find("no spec for job 'x'"), std::string::npos);
  r.set_available(true);
  r.set_error("");
  r.set_epoch(7);
  r.set_jobs(3);
  r.set_gpus(48);
  r.set_gpus_recovered(4.8);
  r.set_observed(2);
  r.set_error_p50(0.02);
  r.set_error_p90(0.3);
  r.set_error_threshold(0.1);
  r.set_plan_converged(true);
  r.set_plan_rounds(12);
  r.set_ecmp_converged(false);  // Only the counterfactual's fixed point was not reached.
  r.set_ecmp_rounds(60);
  v1::JobSummary g = Summary("gainer", 0, 1);
  g.set_has_prediction(true);
  g.set_predicted_ms(100);
  g.set_ecmp_ms(140);
  g.set_gain(1 - 100.0 / 140);
  g.set_observed_ms(102);
  *r.add_gainers() = g;
  v1::JobSummary m = g;
  m.set_job_id("wrong");
  m.set_observed_ms(200);
  *r.add_mispredicted() = m;
  const std::string text = RenderImpactText(r);
  EXPECT_NE(text.find("epoch 7: 3 jobs, 48 GPUs; against ECMP the plan recovers 4.8 GPU-hours "
                      "per hour (10.0% of the GPUs)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("median 2.0%, p90 30.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("gainer"), std::string::npos) << text;
  EXPECT_NE(text.find("+28.6%"), std::string::npos) << text;
  EXPECT_NE(text.find("lose most against ECMP:\n  (none)"), std::string::npos) << text;
  EXPECT_NE(text.find("off by more than 10%"), std::string::npos) << text;
  EXPECT_NE(text.find("wrong"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: the model did not settle under the ECMP within 60 rounds"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("did not settle under the plan"), std::string::npos) << text;
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["ecmp_converged"], false);
  EXPECT_EQ(j["plan_rounds"], 12);
  EXPECT_EQ(j["gainers"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["gpus_recovered"].get<double>(), 4.8);
  EXPECT_EQ(j["mispredicted"][0]["job_id"], "wrong");
}

TEST(TextTest, JobsTableShowsBoundedCorrectionsAsFindings) {
  // k_j at its bounds is what the pair comparison found, not a ratio (core/priority.h): the
  // table says "max"/"min" and explains the order under the table; P stays k_j * I_j.
  v1::ListJobsReply reply;
  *reply.add_jobs() = Summary("hidden-ref", 1, 1);
  v1::JobSummary* top = reply.add_jobs();
  *top = Summary("exposed", 0, 0);
  top->set_k(core::kMaxCorrection);
  top->set_priority(core::kMaxCorrection * 1.5e14);
  const std::string text = RenderJobsTable(reply);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 4u) << text;  // Header, 2 rows, one legend line.
  EXPECT_NE(lines[2].find(" max "), std::string::npos) << text;
  EXPECT_NE(lines[2].find("150P"), std::string::npos) << text;  // 1e3 x 150T, not 1.5e20.
  EXPECT_EQ(lines[3].rfind("K max: ", 0), 0u) << text;
  EXPECT_EQ(text.find("K min"), std::string::npos) << text;
  // An older daemon's 1e6 guard is shown the same way.
  top->set_k(1e6);
  EXPECT_NE(Lines(RenderJobsTable(reply))[2].find(" max "), std::string::npos);
  top->set_k(1.0 / core::kMaxCorrection);
  EXPECT_NE(RenderJobsTable(reply).find("K min: "), std::string::npos);
  // Ordinary factors keep their number and add no legend.
  top->set_k(2.5);
  EXPECT_EQ(Lines(RenderJobsTable(reply)).size(), 3u);
}

TEST(TextTest, JobDetailSaysWhatThePairComparisonFound) {
  v1::JobDetail d = Detail();
  d.mutable_summary()->set_k(core::kMaxCorrection);
  std::string text = RenderJobDetailText(d);
  EXPECT_NE(text.find("k_j            1e+03 (bound): going first gains this job link time "
                      "while the reference job loses none"),
            std::string::npos)
      << text;
  // The numbers behind it: 12 ms/s gained, nothing lost (the bound).
  d.set_reference_job("big-ring");
  d.set_pair_gain(0.012);
  d.set_pair_loss(0.0);
  text = RenderJobDetailText(d);
  EXPECT_NE(text.find("pair vs big-ring  going first: this job gains 12ms/s of link time, the "
                      "reference loses 0ms/s"),
            std::string::npos)
      << text;
  EXPECT_EQ(ToJson(d)["pair_gain"], 0.012);
  EXPECT_EQ(ToJson(d)["reference_job"], "big-ring");
  d.set_reference(true);
  d.mutable_summary()->set_k(1.0);
  text = RenderJobDetailText(d);
  EXPECT_NE(text.find("k_j            reference job"), std::string::npos) << text;
  EXPECT_EQ(text.find("pair vs"), std::string::npos) << text;
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
                                   "utilization", "jobs", "admin", "reason"}));
  v1::SetLinkReply set;
  *set.add_changed() = *l;
  EXPECT_EQ(ToJson(set)["changed"][0]["name"], "tor0->agg1");
  EXPECT_EQ(RenderSetLinkText(set).rfind("Changed 1 link(s):", 0), 0u);

  // Issue #31: a capacity of 1 b/s under a 80 Gb/s load was shown as 8000000000000.0%.
  l->set_capacity_bps(1);
  l->set_utilization(8e10);
  const std::string absurd = RenderLinksTable(reply);
  EXPECT_NE(absurd.find(">1000%"), std::string::npos) << absurd;
  EXPECT_EQ(absurd.find("e+"), std::string::npos) << absurd;
  EXPECT_EQ(absurd.find("00000"), std::string::npos) << absurd;
  for (double nonsense : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()}) {
    l->set_utilization(nonsense);
    const std::string text_nonsense = RenderLinksTable(reply);
    EXPECT_EQ(text_nonsense.find('%'), std::string::npos) << text_nonsense;
    EXPECT_TRUE(ToJson(reply)["links"][0]["utilization"].is_null());
  }
  EXPECT_EQ(FormatUtilization(0.8), "80.0%");
  EXPECT_EQ(FormatUtilization(10.0), "1000.0%");
  EXPECT_EQ(FormatUtilization(10.5), ">1000%");
  EXPECT_EQ(FormatUtilization(-0.1), "-");
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

// ---------------------------------------------------------------------------------------------
// Untrusted text (issue #10): the daemon's strings must not reach the terminal raw.

// The attack from the report: retitle the terminal, clear it, forge a row; plus DEL, a C1 CSI,
// a bidi override, a tab, a NUL and bytes that are not UTF-8.
const std::string kHostile = std::string("bert\x1b]0;owned\x07\x1b[2J\nforged row\r\t\x7f") +
                             "\xc2\x9b" + "31m\xe2\x80\xae" + "evil\xff\xfe" +
                             std::string("\0nul", 4) + "\\x1b";

// Every line is printable text (no control character, no C1, no bidi override, valid UTF-8).
void ExpectSafeForTerminal(const std::string& text) {
  for (const std::string& line : Lines(text)) {
    EXPECT_TRUE(core::IsPrintableText(line))
        << "unprintable byte at " << core::FirstUnprintable(line) << " in line: " << line;
  }
}

TEST(EscapeTest, HostileStringIsShownAsVisibleEscapes) {
  v1::JobDetail d = Detail();
  d.set_model(kHostile);
  const std::string text = RenderJobDetailText(d);
  ExpectSafeForTerminal(text);
  EXPECT_NE(text.find("model bert\\x1b]0;owned\\x07\\x1b[2J\\x0aforged row\\x0d\\x09\\x7f"
                      "\\xc2\\x9b31m\\xe2\\x80\\xaeevil\\xff\\xfe\\x00nul\\\\x1b"),
            std::string::npos)
      << text;
  // Same number of lines as with a harmless model: the newline forged nothing.
  EXPECT_EQ(Lines(text).size(), Lines(RenderJobDetailText(Detail())).size());
}

TEST(EscapeTest, EveryHumanRenderingEscapesEveryDaemonString) {
  v1::StatusReply status;
  status.set_version(kHostile);
  status.set_topology(kHostile);
  status.set_state_path(kHostile);
  status.set_store_error(kHostile);
  (*status.mutable_jobs_by_state())[kHostile] = 1;
  (*status.mutable_refusals())[kHostile] = 2;
  v1::StatusReply plain_status;
  plain_status.set_store_error("disk full");
  (*plain_status.mutable_jobs_by_state())["x"] = 1;
  (*plain_status.mutable_refusals())["y"] = 2;
  ExpectSafeForTerminal(RenderStatusText(status));
  EXPECT_EQ(Lines(RenderStatusText(status)).size(), Lines(RenderStatusText(plain_status)).size());

  v1::ListJobsReply jobs;
  *jobs.add_jobs() = Summary(kHostile, 0, 1);
  jobs.mutable_jobs(0)->set_tenant(kHostile);
  *jobs.add_jobs() = Summary("ok", 1, 2);
  ExpectSafeForTerminal(RenderJobsTable(jobs));
  EXPECT_EQ(Lines(RenderJobsTable(jobs)).size(), 3u);  // Header + 2 rows, nothing forged.

  v1::JobDetail d = Detail();
  d.mutable_summary()->set_job_id(kHostile);
  d.mutable_summary()->set_tenant(kHostile);
  d.set_model(kHostile);
  d.set_hosts(0, kHostile);
  d.set_bottleneck(kHostile);
  d.set_explanation(kHostile);
  d.mutable_flows(0)->set_src_nic(kHostile);
  d.mutable_flows(0)->set_dst_nic(kHostile);
  d.mutable_flows(0)->set_path(1, kHostile);
  d.mutable_contends_with(0)->set_other_job(kHostile);
  d.mutable_contends_with(0)->set_links(0, kHostile);
  ExpectSafeForTerminal(RenderJobDetailText(d));
  EXPECT_EQ(Lines(RenderJobDetailText(d)).size(), Lines(RenderJobDetailText(Detail())).size());

  v1::ListLinksReply links;
  links.add_links()->set_name(kHostile);
  ExpectSafeForTerminal(RenderLinksTable(links));
  EXPECT_EQ(Lines(RenderLinksTable(links)).size(), 2u);
  v1::SetLinkReply set;
  set.add_changed()->set_name(kHostile);
  ExpectSafeForTerminal(RenderSetLinkText(set));
  EXPECT_EQ(Lines(RenderSetLinkText(set)).size(), 3u);

  v1::PlanDryRunReply plan;
  plan.add_changes()->set_job_id(kHostile);
  ExpectSafeForTerminal(RenderPlanDryRunText(plan));
  EXPECT_EQ(Lines(RenderPlanDryRunText(plan)).size(), 3u);

  v1::ListSwitchesReply sw;
  v1::SwitchInfo* s = sw.add_switches();
  s->set_name(kHostile);
  s->set_last_error(kHostile);
  s->mutable_capabilities()->add_backends(kHostile);
  ExpectSafeForTerminal(RenderSwitchesTable(sw));
  EXPECT_EQ(Lines(RenderSwitchesTable(sw)).size(), 2u);
}

TEST(EscapeTest, TableAlignsMultiByteTextByCharacters) {
  Table table({{"NAME"}, {"N", true}});
  table.AddRow({"mod\xc3\xa8le", "1"});  // 6 characters, 7 bytes.
  table.AddRow({"abcdef", "2"});
  const auto lines = Lines(table.Render());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "mod\xc3\xa8le  1");
  EXPECT_EQ(lines[2], "abcdef  2");
}

TEST(JsonTest, DumpJsonIsPrintableAsciiAndValidJson) {
  v1::JobDetail d = Detail();
  const std::string valid_hostile = "bert\x1b]0;owned\x07\x1b[2J\nforged\x7f\xc2\x9b\xe2\x80\xae";
  d.set_model(valid_hostile);
  d.set_explanation("mod\xc3\xa8le \xe6\xa8\xa1");  // Harmless non-ASCII.
  d.set_bottleneck("bad\xff utf8");                 // Not UTF-8.
  const std::string text = DumpJson(ToJson(d));
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (u >= 0x20 && u < 0x7f)) << "byte " << static_cast<int>(u);
  }
  EXPECT_NE(text.find("\\u001b]0;owned\\u0007\\u001b[2J\\nforged\\u007f\\u009b\\u202e"),
            std::string::npos)
      << text;
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["model"], valid_hostile);  // Valid UTF-8 round-trips exactly.
  EXPECT_EQ(back["explanation"], "mod\xc3\xa8le \xe6\xa8\xa1");
  EXPECT_EQ(back["bottleneck"], "bad\xef\xbf\xbd utf8");  // U+FFFD, no exception.
}

TEST(JsonTest, StatusStoreHealthStateIdAndRefusals) {
  v1::StatusReply r;
  r.set_store_ok(false);
  r.set_store_error("store: disk I/O error (SQLITE_IOERR)");
  r.set_state_id(0xfedcba9876543210ULL);  // Above 2^53.
  (*r.mutable_refusals())["curve_unauthorized"] = 3;
  (*r.mutable_refusals())["invalid_argument"] = 9;
  const nlohmann::json j = ToJson(r);
  // The old keys are all still there, the new ones added.
  for (const char* key :
       {"version",          "uptime_ms",       "epoch",          "jobs",           "jobs_by_state",
        "clients",          "switches",        "hosts",          "links",          "links_not_up",
        "levels",           "dry_run",         "replans",        "last_replan_ms", "topology",
        "state_path",       "store_ok",        "store_error",    "state_id",       "refusals",
        "quarantined_jobs", "loop_lag_p99_ms", "loop_lag_max_ms"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 23u);
  EXPECT_EQ(j["store_ok"], false);
  EXPECT_EQ(j["store_error"], "store: disk I/O error (SQLITE_IOERR)");
  EXPECT_EQ(j["state_id"], "18364758544493064720");  // Exact, as a string.
  EXPECT_EQ(j["refusals"], nlohmann::json({{"curve_unauthorized", 3}, {"invalid_argument", 9}}));

  const std::string text = RenderStatusText(r);
  EXPECT_NE(text.find("  state id     18364758544493064720\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  store        FAILED (re-plans are not applied): store: disk I/O error"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  refusals     12 (curve_unauthorized 3, invalid_argument 9)\n"),
            std::string::npos)
      << text;

  v1::StatusReply healthy;
  healthy.set_store_ok(true);
  const std::string ok = RenderStatusText(healthy);
  EXPECT_NE(ok.find("  store        ok\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("  state id     -\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("  refusals     0\n"), std::string::npos) << ok;
  EXPECT_EQ(ToJson(healthy)["refusals"], nlohmann::json::object());
  // What a cruxd that does not fill the fields yet sends: store health is unknown, not failed.
  const std::string old = RenderStatusText(v1::StatusReply());
  EXPECT_NE(old.find("  store        unknown"), std::string::npos) << old;
}

TEST(JsonTest, StatusQuarantinedJobsAndLoopLag) {
  v1::StatusReply r;
  r.set_jobs(5);
  r.set_quarantined_jobs(2);
  r.set_loop_lag_p99_ms(1.5);
  r.set_loop_lag_max_ms(12);
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["quarantined_jobs"], 2);
  EXPECT_EQ(j["loop_lag_p99_ms"], 1.5);
  EXPECT_EQ(j["loop_lag_max_ms"], 12.0);
  const std::string text = RenderStatusText(r);
  EXPECT_NE(text.find("  jobs         5, 2 quarantined (stored, do not fit the topology)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  loop lag     p99 1.5ms, max 12ms\n"), std::string::npos) << text;
  // Nothing quarantined: the jobs line says nothing about it.
  r.set_quarantined_jobs(0);
  EXPECT_EQ(RenderStatusText(r).find("quarantined"), std::string::npos);
}

v1::ListSwitchesReply SwitchesWithDrift() {
  v1::ListSwitchesReply sw;
  v1::SwitchInfo* s = sw.add_switches();
  s->set_name("tor0");
  s->set_connected(true);
  s->set_desired_epoch(9);
  s->set_applied_epoch(9);
  s->set_in_sync(true);
  s->set_drift_repairs(4);
  s->set_last_drift_ms(1764480000000);
  s->set_last_drifted_fields(3);
  v1::SwitchCapabilities* caps = s->mutable_capabilities();
  caps->set_queues(8);
  caps->set_strict_priority(true);
  caps->set_dwrr(true);
  caps->add_backends("sonic");
  caps->add_backends("file");
  v1::SwitchInfo* t = sw.add_switches();  // An agent that declared nothing, never drifted.
  t->set_name("tor1");
  t->set_last_error("apply failed: queue 7 busy");
  return sw;
}

TEST(JsonTest, SwitchesSyncDriftAndCapabilities) {
  const nlohmann::json j = ToJson(SwitchesWithDrift());
  ASSERT_EQ(j["switches"].size(), 2u);
  EXPECT_EQ(
      Keys(j["switches"][0]),
      (std::set<std::string>{"name", "connected", "desired_epoch", "applied_epoch", "last_error",
                             "last_seen_ms", "dscp_colours_shared", "in_sync", "drift_repairs",
                             "last_drift_ms", "last_drifted_fields", "capabilities", "highest_term",
                             "stale_term_refused", "enforcement"}));
  EXPECT_EQ(j["switches"][0]["in_sync"], true);
  EXPECT_EQ(j["switches"][0]["drift_repairs"], 4);
  EXPECT_EQ(j["switches"][0]["last_drift_ms"], 1764480000000);
  EXPECT_EQ(j["switches"][0]["last_drifted_fields"], 3);
  EXPECT_EQ(j["switches"][0]["capabilities"], nlohmann::json({{"queues", 8},
                                                              {"strict_priority", true},
                                                              {"dwrr", true},
                                                              {"pbr_redirect", false},
                                                              {"backends", {"sonic", "file"}}}));
  EXPECT_EQ(j["switches"][1]["in_sync"], false);
  EXPECT_EQ(j["switches"][1]["capabilities"]["backends"], nlohmann::json::array());
}

TEST(StatusRenderTest, HaShowsRoleLeaderTermAndEveryInstance) {
  v1::StatusReply r;
  r.set_version("0.1.0");
  v1::HaStatus* h = r.mutable_ha();
  h->set_instance("b");
  h->set_role("standby");
  h->set_term(12);
  h->set_leader("a");
  h->set_leader_endpoint("tcp://10.0.0.21:7450");
  h->set_lease_ttl_s(3);
  for (const char* name : {"a", "b"}) {
    v1::HaMember* m = h->add_members();
    m->set_instance(name);
    m->set_role(std::string(name) == "a" ? "leader" : "standby");
    m->set_revision(std::string(name) == "a" ? 12 : 15);
  }
  const std::string text = RenderStatusText(r);
  EXPECT_NE(text.find("b is standby; leader a, term 12, lease TTL 3 s"), std::string::npos) << text;
  EXPECT_NE(text.find("leader a (revision 12"), std::string::npos) << text;
  EXPECT_NE(text.find("standby b (revision 15"), std::string::npos) << text;
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["ha"]["role"], "standby");
  EXPECT_EQ(j["ha"]["term"], 12);
  EXPECT_EQ(j["ha"]["members"].size(), 2u);
  EXPECT_FALSE(ToJson(v1::StatusReply()).contains("ha")) << "no ha key from a single cruxd";
}

TEST(TextTest, SwitchesTableKeepsOldColumnsAndAddsSyncDriftCapabilities) {
  const auto lines = Lines(RenderSwitchesTable(SwitchesWithDrift()));
  ASSERT_EQ(lines.size(), 3u);
  // The old columns first, in their old order; new ones before the free-text LAST ERROR.
  const std::vector<std::string> titles = {
      "SWITCH",       "CONNECTED", "DESIRED",       "APPLIED",    "SHARED DSCP",
      "LAST SEEN",    "IN SYNC",   "DRIFT REPAIRS", "LAST DRIFT", "DRIFTED",
      "CAPABILITIES", "TERM",      "STALE TERM",    "ENFORCED",   "LAST ERROR"};
  size_t at = 0;
  for (const std::string& title : titles) {
    const size_t found = lines[0].find(title, at);
    ASSERT_NE(found, std::string::npos) << title << " in " << lines[0];
    at = found + title.size();
  }
  EXPECT_NE(lines[1].find("yes"), std::string::npos);
  EXPECT_NE(lines[1].find("2025-11-30T05:20:00Z"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("8q strict dwrr sonic+file"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("  4  "), std::string::npos) << lines[1];  // Drift repairs.
  EXPECT_NE(lines[2].find("apply failed: queue 7 busy"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].rfind("tor1", 0), 0u);
}

// Enforcement verification (issue #29): the ENFORCED column, the first difference (or the
// reason) below the table, every field in JSON; device text is escaped.
TEST(TextTest, SwitchesShowEnforcementAndTheFirstDifference) {
  v1::ListSwitchesReply sw = SwitchesWithDrift();
  v1::EnforcementCheck* e0 = sw.mutable_switches(0)->mutable_enforcement();
  e0->set_status(v1::ENFORCEMENT_STATUS_MISMATCH);
  e0->set_detail(
      "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615): dscp 10 -> tc 0, the plan says tc 5");
  e0->set_maps_checked(4);
  e0->set_queues_checked(16);
  e0->set_checked_unix_ms(1764480000000);
  e0->set_epoch(9);
  v1::EnforcementCheck* e1 = sw.mutable_switches(1)->mutable_enforcement();
  e1->set_detail("the file backend cannot verify enforcement\x1b[2J");
  v1::SwitchInfo* ok = sw.add_switches();
  ok->set_name("tor2");
  ok->mutable_enforcement()->set_status(v1::ENFORCEMENT_STATUS_MATCH);
  ok->mutable_enforcement()->set_checked_unix_ms(1764480000000);

  const std::string text = RenderSwitchesTable(sw);
  ExpectSafeForTerminal(text);
  const auto lines = Lines(text);
  ASSERT_EQ(lines.size(), 6u) << text;  // Header, 3 rows, 2 detail lines (tor2 has none).
  const size_t col = lines[0].find("ENFORCED");
  ASSERT_NE(col, std::string::npos);
  EXPECT_EQ(lines[1].substr(col, 8), "MISMATCH") << text;
  EXPECT_EQ(lines[2].substr(col, 7), "UNKNOWN") << text;
  EXPECT_EQ(lines[3].substr(col, 8), "ENFORCED") << text;
  EXPECT_EQ(lines[4],
            "tor0: MISMATCH (epoch 9, checked 2025-11-30T05:20:00Z): Ethernet0 DSCP_TO_TC (ASIC_DB "
            "oid:0x14000000000615): dscp 10 -> tc 0, the plan says tc 5");
  EXPECT_EQ(lines[5], "tor1: UNKNOWN: the file backend cannot verify enforcement\\x1b[2J");

  const nlohmann::json j = ToJson(sw);
  EXPECT_EQ(j["switches"][0]["enforcement"], nlohmann::json({{"status", "mismatch"},
                                                             {"detail", e0->detail()},
                                                             {"maps_checked", 4},
                                                             {"queues_checked", 16},
                                                             {"checked_unix_ms", 1764480000000},
                                                             {"epoch", 9}}));
  EXPECT_EQ(j["switches"][1]["enforcement"]["status"], "unknown");
  EXPECT_EQ(j["switches"][2]["enforcement"]["status"], "match");
}

v1::ListFaultsReply FaultsReply() {
  v1::ListFaultsReply r;
  r.set_automatic(true);
  r.set_evaluations(42);
  r.set_watched_links(24);
  r.set_flow_covered(16);
  r.set_probe_covered(4);
  r.set_probes(3);
  r.set_probing(true);
  r.set_unwatched_total(4);
  for (const char* l : {"host3/nic0->tor1", "tor1->host3/nic0", "host1/nic0->tor0", "x"}) {
    r.add_unwatched(l);
  }
  v1::FaultInfo* f = r.add_links();
  f->set_link("tor0->agg0");
  f->set_health(v1::LINK_HEALTH_DEGRADED);
  f->set_capacity_bps(120e9);
  f->set_automatic(v1::LINK_HEALTH_DEGRADED);
  f->set_suspect(true);
  f->set_score(0.7);
  f->set_reason("one signal: least squares: it delivers ~30% of its rate");
  f->add_evidence("flow of job lg-1 host0/nic0->host4/nic0 (sport 49152): 30% of its best rate");
  f->set_since_unix_ms(1700000000000);
  f->set_hold_s(5);
  f->set_changes(1);
  v1::FaultInfo* pinned = r.add_links();
  pinned->set_link("tor1->agg1");
  pinned->set_health(v1::LINK_HEALTH_DOWN);
  pinned->set_automatic(v1::LINK_HEALTH_UP);
  pinned->set_admin(true);
  v1::FaultEvent* e = r.add_events();
  e->set_at_unix_ms(1700000000000);
  e->set_link("tor0->agg0");
  e->set_from(v1::LINK_HEALTH_UP);
  e->set_to(v1::LINK_HEALTH_DEGRADED);
  e->set_capacity_bps(120e9);
  e->set_automatic(true);
  e->set_reason("tor0->agg0 degraded (30% of nominal): one signal: least squares");
  e->add_jobs("lg-1");
  v1::ContradictedJob* c = r.add_contradicted_jobs();
  c->set_job_id("lg-0");
  c->set_since_unix_ms(1700000001000);
  c->set_slow_flows(4);
  c->set_evaluations(7);
  c->set_example(
      "flow of job lg-0 host3/nic0->host6/nic0 (sport 59823) is slow, yet job lg-1 is "
      "healthy at the same or a lower priority on every link of its path");
  r.set_disbelieved_reports(9);
  return r;
}

TEST(JsonTest, FaultsHaveDocumentedKeys) {
  const nlohmann::json j = ToJson(FaultsReply());
  EXPECT_EQ(Keys(j), (std::set<std::string>{"automatic", "evaluations", "coverage", "links",
                                            "events", "contradicted_jobs", "disbelieved_reports"}));
  ASSERT_EQ(j["contradicted_jobs"].size(), 1u);
  EXPECT_EQ(
      Keys(j["contradicted_jobs"][0]),
      (std::set<std::string>{"job_id", "since_unix_ms", "slow_flows", "evaluations", "example"}));
  EXPECT_EQ(j["contradicted_jobs"][0]["job_id"], "lg-0");
  EXPECT_EQ(j["disbelieved_reports"], 9);
  EXPECT_EQ(Keys(j["coverage"]),
            (std::set<std::string>{"watched_links", "flow_covered", "probe_covered", "probes",
                                   "probing", "unwatched", "unwatched_total"}));
  EXPECT_EQ(j["coverage"]["unwatched"].size(), 4u);
  ASSERT_EQ(j["links"].size(), 2u);
  EXPECT_EQ(j["links"][0]["health"], "degraded");
  EXPECT_EQ(j["links"][0]["automatic_health"], "degraded");
  EXPECT_EQ(j["links"][1]["admin"], true);
  EXPECT_EQ(j["links"][1]["automatic_health"], "up");
  ASSERT_EQ(j["events"].size(), 1u);
  EXPECT_EQ(j["events"][0]["to"], "degraded");
  EXPECT_EQ(j["events"][0]["jobs"], nlohmann::json::array({"lg-1"}));
}

TEST(TextTest, FaultsShowStateWhoReasonEvidenceCoverageAndChanges) {
  const std::string text = RenderFaultsText(FaultsReply());
  EXPECT_NE(text.find("Automatic fault handling: on, 42 evaluations."), std::string::npos) << text;
  EXPECT_NE(text.find("Watched links: 24 (16 crossed by flows, 4 by probes only, 4 by neither); "
                      "3 probes."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Not watched: host3/nic0->tor1"), std::string::npos) << text;
  EXPECT_NE(text.find("automatic"), std::string::npos) << text;
  EXPECT_NE(text.find("admin"), std::string::npos) << text;
  EXPECT_NE(text.find("tor0->agg0: one signal: least squares"), std::string::npos) << text;
  EXPECT_NE(text.find("    flow of job lg-1"), std::string::npos) << text;
  EXPECT_NE(text.find("tor0->agg0 up -> degraded (automatic), 1 job(s) crossed it"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Not believed (their reports contradict every other source; 9 reports left "
                      "out so far):\n  job lg-0 since "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("4 slow flows, 7 evaluations\n    flow of job lg-0"), std::string::npos)
      << text;
  v1::ListFaultsReply empty;
  EXPECT_NE(RenderFaultsText(empty).find("No suspect, no pinned or unhealthy link."),
            std::string::npos);
  EXPECT_NE(RenderFaultsText(empty).find("(probing off)"), std::string::npos);
}

TEST(TextTest, JobDetailListsTheLinkChangesThatReroutedIt) {
  v1::JobDetail d;
  *d.mutable_summary() = Summary("lg-1", 1, 0);
  v1::FaultEvent* e = d.add_faults();
  e->set_at_unix_ms(1700000000000);
  e->set_link("tor0->agg0");
  e->set_from(v1::LINK_HEALTH_UP);
  e->set_to(v1::LINK_HEALTH_DOWN);
  e->set_automatic(true);
  e->set_reason("tor0->agg0 down: link state: switch tor0 port Ethernet0 oper_status down");
  const std::string text = RenderJobDetailText(d);
  EXPECT_NE(text.find("Link changes that re-routed it (1, newest first):"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tor0->agg0 up -> down (automatic)"), std::string::npos) << text;
  EXPECT_NE(text.find("oper_status down"), std::string::npos) << text;
  EXPECT_EQ(ToJson(d)["faults"][0]["reason"], e->reason());
}

}  // namespace
}  // namespace crux::cruxctl
