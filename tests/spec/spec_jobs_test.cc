// Tests for crux::spec job parsing: every key, traffic vs flows, and strict errors naming the
// key path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/core/model/job.h"
#include "crux/core/topology/builders.h"
#include "crux/spec/jobs_spec.h"
#include "crux/spec/topology_spec.h"

namespace crux::spec {
namespace {

using ::testing::HasSubstr;

// 4 ToRs x 2 hosts, 2 NICs per host: host0..host7, hostK/nic0..1, tor0..3, agg0..1.
core::Topology SmallClos() {
  core::Clos2Params p;
  p.tors = 4;
  p.hosts_per_tor = 2;
  p.host.nics_per_host = 2;
  core::Result<core::Topology> topo = core::BuildClos2(p);
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  return std::move(topo).value();
}

class SpecJobsTest : public ::testing::Test {
 protected:
  core::Result<std::vector<JobEntry>> Parse(const std::string& yaml) {
    return ParseJobs(yaml, topo_);
  }
  void ExpectError(const std::string& yaml, std::initializer_list<std::string> fragments) {
    core::Result<std::vector<JobEntry>> jobs = Parse(yaml);
    ASSERT_FALSE(jobs.ok()) << "parsed unexpectedly:\n" << yaml;
    for (const std::string& f : fragments) {
      EXPECT_THAT(jobs.status().message(), HasSubstr(f)) << yaml;
    }
  }
  // One job with `extra` appended to a valid minimal body.
  static std::string Job(const std::string& extra) {
    return "jobs:\n  - id: j\n    hosts: [host0, host2]\n    compute_time_s: 1\n" + extra;
  }
  static std::string RingJob(const std::string& extra) {
    return Job("    traffic: {pattern: ring_allreduce, bytes: 1e9}\n" + extra);
  }

  core::Topology topo_ = SmallClos();
};

TEST_F(SpecJobsTest, ParsesEveryKey) {
  core::Result<std::vector<JobEntry>> jobs = Parse(R"(
jobs:
  - id: gpt
    hosts: [host0, host2, host4]
    gpus_per_host: 4
    compute_time_s: 1.5
    flops_per_iteration: 2.5e15
    overlap_start: 0.25
    compression_ratio: 0.5
    traffic: {pattern: all_to_all, bytes: 123456789}
    arrival_s: 10
    duration_s: 3600
    iterations: 500
    fixed_rank: 2
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  const JobEntry& e = (*jobs)[0];
  EXPECT_EQ(e.spec.id, "gpt");
  ASSERT_EQ(e.spec.hosts.size(), 3u);
  EXPECT_EQ(topo_.node(e.spec.hosts[2]).name, "host4");
  EXPECT_EQ(e.spec.gpus_per_host, 4);
  EXPECT_EQ(e.spec.compute_time, core::Duration::Millis(1500));
  ASSERT_TRUE(e.spec.flops_per_iteration.has_value());
  EXPECT_DOUBLE_EQ(e.spec.flops_per_iteration->value(), 2.5e15);
  EXPECT_DOUBLE_EQ(e.spec.overlap_start, 0.25);
  EXPECT_DOUBLE_EQ(e.spec.compression_ratio, 0.5);
  EXPECT_EQ(e.spec.pattern, core::TrafficPattern::kAllToAll);
  EXPECT_EQ(e.spec.pattern_bytes, core::Bytes::Of(123456789));
  EXPECT_EQ(e.arrival_s, 10.0);
  EXPECT_EQ(e.duration_s, 3600.0);
  EXPECT_EQ(e.iterations, 500);
  EXPECT_EQ(e.fixed_rank, 2);
}

TEST_F(SpecJobsTest, OptionalKeysDefaultToTheJobSpecDefaults) {
  core::Result<std::vector<JobEntry>> jobs = Parse(RingJob(""));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const JobEntry& e = (*jobs)[0];
  const core::JobSpec defaults;
  EXPECT_EQ(e.spec.gpus_per_host, defaults.gpus_per_host);
  EXPECT_EQ(e.spec.overlap_start, defaults.overlap_start);
  EXPECT_EQ(e.spec.compression_ratio, defaults.compression_ratio);
  EXPECT_FALSE(e.spec.flops_per_iteration.has_value());
  EXPECT_EQ(e.spec.pattern, core::TrafficPattern::kRingAllReduce);
  EXPECT_EQ(e.spec.pattern_bytes, core::Bytes::Of(1000000000));
  EXPECT_FALSE(e.arrival_s.has_value());
  EXPECT_FALSE(e.duration_s.has_value());
  EXPECT_FALSE(e.iterations.has_value());
  EXPECT_FALSE(e.fixed_rank.has_value());
}

TEST_F(SpecJobsTest, ExplicitFlowsAcceptNicsAndHosts) {
  core::Result<std::vector<JobEntry>> jobs = Parse(Job(R"(    flows:
      - {src: host0/nic1, dst: host2/nic0, bytes: 1000}
      - {src: host2, dst: host0, bytes: 2.5e3}
)"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const core::JobSpec& s = (*jobs)[0].spec;
  EXPECT_EQ(s.pattern, core::TrafficPattern::kExplicit);
  ASSERT_EQ(s.flows.size(), 2u);
  EXPECT_EQ(topo_.node(s.flows[0].src).name, "host0/nic1");
  EXPECT_EQ(topo_.node(s.flows[0].dst).name, "host2/nic0");
  EXPECT_EQ(s.flows[0].bytes, core::Bytes::Of(1000));
  EXPECT_EQ(topo_.node(s.flows[1].src).name, "host2");
  EXPECT_EQ(s.flows[1].bytes, core::Bytes::Of(2500));
}

TEST_F(SpecJobsTest, IntegerIdsAreKeptAsText) {
  core::Result<std::vector<JobEntry>> jobs = Parse(R"(
jobs:
  - {id: 42, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
  - {id: "007", hosts: [host2, host3], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].spec.id, "42");
  EXPECT_EQ((*jobs)[1].spec.id, "007");
}

TEST_F(SpecJobsTest, EmptyJobListIsValid) {
  core::Result<std::vector<JobEntry>> jobs = Parse("jobs: []\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_TRUE(jobs->empty());
}

TEST_F(SpecJobsTest, UnknownHostIsNamedByPath) {
  ExpectError(R"(
jobs:
  - {id: a, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
  - {id: b, hosts: [host2, host3, host99], compute_time_s: 1,
     traffic: {pattern: pipeline, bytes: 10}}
)",
              {"jobs[1].hosts[2]: unknown host 'host99'", "line 4"});
}

// Issue #10 (8, 13): job ids obey the name rule; control characters are refused with the YAML
// path and line, and the message shows them escaped (never raw on a terminal).
TEST_F(SpecJobsTest, JobIdsFollowTheNameRule) {
  const std::string body =
      ", hosts: [host0, host2], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 10}}\n";
  ExpectError(
      "jobs:\n  - {id: \"evil\\e[2J\\e]0;pwn\\a\"" + body,
      {"jobs[0].id: invalid job id 'evil\\x1b[2J\\x1b]0;pwn\\x07'", "[A-Za-z0-9._:/-]", "line 2"});
  ExpectError("jobs:\n  - {id: \"a b\"" + body, {"jobs[0].id: invalid job id 'a b'"});
  ExpectError("jobs:\n  - {id: \"tab\\there\"" + body, {"invalid job id 'tab\\x09here'"});
  ExpectError("jobs:\n  - {id: \"caf\u00e9\"" + body, {"invalid job id 'caf\u00e9'"});
  ExpectError("jobs:\n  - {id: " + std::string(129, 'j') + body, {"jobs[0].id: invalid job id"});
  core::Result<std::vector<JobEntry>> bad = Parse("jobs:\n  - {id: \"\\e[31mred\"" + body);
  ASSERT_FALSE(bad.ok());
  for (char c : bad.status().message()) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << bad.status().message();
  }
  core::Result<std::vector<JobEntry>> ok = Parse("jobs:\n  - {id: \"team-a/llama_7b:v1.2\"" + body);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

// Issue #10 (8): a host name with control characters is "unknown", quoted escaped.
TEST_F(SpecJobsTest, UnknownHostWithControlCharactersIsQuotedEscaped) {
  core::Result<std::vector<JobEntry>> r = Parse(
      "jobs:\n  - {id: a, hosts: [host0, \"host1\\e[2J\"], compute_time_s: 1,\n"
      "     traffic: {pattern: pipeline, bytes: 10}}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("jobs[0].hosts[1]: unknown host 'host1\\x1b[2J'"));
  for (char c : r.status().message()) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r.status().message();
}

TEST_F(SpecJobsTest, NodeThatIsNotAHostIsRejected) {
  ExpectError(
      "jobs: [{id: a, hosts: [host0, tor0], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].hosts[1]: 'tor0' is not a host"});
  ExpectError(
      "jobs: [{id: a, hosts: [host0, host1/nic0], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].hosts[1]: 'host1/nic0' is not a host"});
  ExpectError(Job("    flows: [{src: tor0, dst: host2/nic0, bytes: 1}]\n"),
              {"jobs[0].flows[0].src: 'tor0' must be a NIC or a host"});
  ExpectError(Job("    flows: [{src: host0/nic0, dst: host77/nic0, bytes: 1}]\n"),
              {"jobs[0].flows[0].dst: unknown node 'host77/nic0'"});
  ExpectError(Job("    flows: [{src: host0/nic0, dst: host0/nic0, bytes: 1}]\n"),
              {"jobs[0].flows[0].dst: must differ from src"});
}

TEST_F(SpecJobsTest, DuplicateIdsAreRejected) {
  core::Result<std::vector<JobEntry>> jobs = Parse(R"(
jobs:
  - {id: x, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
  - {id: y, hosts: [host2, host3], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
  - {id: x, hosts: [host4, host5], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
)");
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), core::StatusCode::kAlreadyExists);
  EXPECT_THAT(jobs.status().message(), HasSubstr("jobs[2].id: duplicate job id 'x'"));
  EXPECT_THAT(jobs.status().message(), HasSubstr("jobs[0]"));
}

TEST_F(SpecJobsTest, DuplicateHostInOneJobIsRejected) {
  ExpectError(
      "jobs: [{id: a, hosts: [host0, host0], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].hosts[1]: duplicate host 'host0'"});
}

TEST_F(SpecJobsTest, BadComputeTimesAreRejected) {
  const std::string traffic = "    traffic: {pattern: ring_allreduce, bytes: 1e9}\n";
  auto with_compute = [&](const std::string& v) {
    return "jobs:\n  - id: j\n    hosts: [host0, host2]\n    compute_time_s: " + v + "\n" + traffic;
  };
  ExpectError(with_compute(".nan"), {"jobs[0].compute_time_s", "finite", "line 4"});
  ExpectError(with_compute("-1"), {"jobs[0].compute_time_s: must be > 0 (got -1)"});
  ExpectError(with_compute("0"), {"jobs[0].compute_time_s: must be > 0 (got 0)"});
  ExpectError(with_compute(".inf"), {"jobs[0].compute_time_s"});
  ExpectError(with_compute("'1'"), {"jobs[0].compute_time_s: must be a number"});
  ExpectError(with_compute("1e-12"), {"jobs[0].compute_time_s"});
  ExpectError("jobs:\n  - id: j\n    hosts: [host0]\n" + traffic,
              {"jobs[0].compute_time_s: missing required key"});
}

TEST_F(SpecJobsTest, RangeChecksNameTheKey) {
  ExpectError(RingJob("    overlap_start: 1.5\n"),
              {"jobs[0].overlap_start: must be in [0, 1] (got 1.5)"});
  ExpectError(RingJob("    overlap_start: -0.1\n"), {"jobs[0].overlap_start"});
  ExpectError(RingJob("    overlap_start: .nan\n"), {"jobs[0].overlap_start", "finite"});
  ExpectError(RingJob("    compression_ratio: 0\n"),
              {"jobs[0].compression_ratio: must be > 0 (got 0)"});
  ExpectError(RingJob("    compression_ratio: -2\n"), {"jobs[0].compression_ratio"});
  ExpectError(RingJob("    compression_ratio: 5000\n"),
              {"jobs[0].compression_ratio: must be in (0, 1000]"});
  ExpectError(RingJob("    flops_per_iteration: -1e15\n"), {"jobs[0].flops_per_iteration"});
  ExpectError(RingJob("    gpus_per_host: 0\n"), {"jobs[0].gpus_per_host: must be >= 1"});
  ExpectError(RingJob("    gpus_per_host: 2.5\n"), {"jobs[0].gpus_per_host: must be an integer"});
  ExpectError(RingJob("    arrival_s: -1\n"), {"jobs[0].arrival_s: must be >= 0"});
  ExpectError(RingJob("    duration_s: 0\n"), {"jobs[0].duration_s: must be > 0"});
  ExpectError(RingJob("    iterations: 0\n"), {"jobs[0].iterations: must be >= 1"});
  ExpectError(RingJob("    iterations: 1.5\n"), {"jobs[0].iterations: must be an integer"});
  ExpectError(RingJob("    fixed_rank: -1\n"), {"jobs[0].fixed_rank: must be >= 0"});
}

TEST_F(SpecJobsTest, BytesMustBePositiveFinitePlainNumbers) {
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: -5}\n"),
              {"jobs[0].traffic.bytes: must be > 0 (got -5)"});
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: 0}\n"),
              {"jobs[0].traffic.bytes: must be > 0"});
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: .nan}\n"),
              {"jobs[0].traffic.bytes", "finite"});
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: '100'}\n"),
              {"jobs[0].traffic.bytes: must be a number"});
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: 1GB}\n"),
              {"jobs[0].traffic.bytes: must be a number (got 1GB)"});
  ExpectError(Job("    traffic: {pattern: ring_allreduce, bytes: 0.2}\n"),
              {"jobs[0].traffic.bytes: must be at least 1 byte"});
  ExpectError(Job("    flows: [{src: host0, dst: host2, bytes: -1}]\n"),
              {"jobs[0].flows[0].bytes: must be > 0"});
}

TEST_F(SpecJobsTest, TrafficAndFlowsAreExclusiveAndOneIsRequired) {
  ExpectError(Job("    traffic: {pattern: pipeline, bytes: 1}\n"
                  "    flows: [{src: host0, dst: host2, bytes: 1}]\n"),
              {"jobs[0].flows: give either traffic or flows, not both"});
  ExpectError(Job(""), {"jobs[0].traffic: missing required key"});
  ExpectError(Job("    flows: []\n"), {"jobs[0].flows: must list at least one flow"});
  ExpectError(Job("    traffic: {pattern: broadcast, bytes: 1}\n"),
              {"jobs[0].traffic.pattern: unknown pattern 'broadcast'"});
  ExpectError(Job("    traffic: {pattern: explicit, bytes: 1}\n"),
              {"jobs[0].traffic.pattern", "use flows:"});
  ExpectError(Job("    traffic: {pattern: pipeline}\n"),
              {"jobs[0].traffic.bytes: missing required key"});
  ExpectError(Job("    traffic: {bytes: 1}\n"), {"jobs[0].traffic.pattern: missing required key"});
  ExpectError(Job("    flows: [{src: host0, bytes: 1}]\n"),
              {"jobs[0].flows[0].dst: missing required key"});
}

TEST_F(SpecJobsTest, UnknownAndMissingKeysAreNamed) {
  ExpectError(RingJob("    priority: 3\n"), {"jobs[0].priority: unknown key"});
  ExpectError(Job("    traffic: {pattern: pipeline, bytes: 1, size: 2}\n"),
              {"jobs[0].traffic.size: unknown key"});
  ExpectError(Job("    flows: [{src: host0, dst: host2, bytes: 1, rate: 2}]\n"),
              {"jobs[0].flows[0].rate: unknown key"});
  ExpectError("jobs: [{hosts: [host0], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 1}}]",
              {"jobs[0].id: missing required key"});
  ExpectError("jobs: [{id: a, compute_time_s: 1, traffic: {pattern: pipeline, bytes: 1}}]",
              {"jobs[0].hosts: missing required key"});
  ExpectError(
      "jobs: [{id: a, hosts: [], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].hosts: must list at least one host"});
  ExpectError(
      "jobs: [{id: '', hosts: [host0], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].id: must not be empty"});
  ExpectError(
      "jobs: [{id: [1], hosts: [host0], compute_time_s: 1, "
      "traffic: {pattern: pipeline, bytes: 1}}]",
      {"jobs[0].id: must be a string"});
  ExpectError("topology: {kind: clos2}\n", {"topology: unknown key"});
  ExpectError("", {"jobs: missing required key"});
  ExpectError("jobs: {id: a}", {"jobs: must be a list"});
  ExpectError("jobs: [3]", {"jobs[0]: must be a map"});
}

TEST_F(SpecJobsTest, BadYamlSyntaxReportsTheLine) {
  ExpectError("jobs:\n  - id: a\n    hosts: [host0\n", {"invalid YAML", "line"});
}

TEST_F(SpecJobsTest, GarbageInputNeverThrows) {
  const char* inputs[] = {"[",
                          "jobs: [",
                          "jobs: [{id: a, hosts: {x: 1}}]",
                          "jobs: [[[]]]",
                          "jobs: [{id: a, hosts: [[host0]]}]",
                          "jobs: !!binary abc",
                          "jobs: [{? [a] : b}]",
                          "{",
                          "\"",
                          "jobs: [{id: a, flows: 3}]"};
  for (const char* in : inputs) {
    core::Result<std::vector<JobEntry>> jobs = Parse(in);
    EXPECT_FALSE(jobs.ok()) << in;
  }
}

TEST_F(SpecJobsTest, JobSpecsKeepInputOrder) {
  core::Result<std::vector<JobEntry>> jobs = Parse(R"(
jobs:
  - {id: b, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
  - {id: a, hosts: [host2, host3], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 10}}
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  std::vector<core::JobSpec> specs = JobSpecs(*jobs);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].id, "b");
  EXPECT_EQ(specs[1].id, "a");
}

TEST_F(SpecJobsTest, LoadJobsFileNamesTheFile) {
  core::Result<std::vector<JobEntry>> jobs = LoadJobsFile("/nonexistent/jobs.yaml", topo_);
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), core::StatusCode::kNotFound);
  EXPECT_THAT(jobs.status().message(), HasSubstr("/nonexistent/jobs.yaml"));
}

}  // namespace
}  // namespace crux::spec
