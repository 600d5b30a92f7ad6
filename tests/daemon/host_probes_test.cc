// Host agents' capacity probe results (HostTelemetry.probes, issue #27) at cruxd's gateway: a
// whole Daemon on a fake-clock loop (daemon_test_util.h) with faults.probes on, and a two-host
// job registered in parts as crux-hostd does. A host reports the probes of its jobs' assignments
// that leave its NICs; they reach the fault manager as host-measured samples, bad ones are
// refused with the field and the reason (counted), and the agent's other reports keep working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crux/protocol/validate.h"
#include "daemon_test_util.h"

namespace crux::daemon::testing {
namespace {

using ::testing::HasSubstr;

v1::HostPart Part(const std::string& host) {
  v1::HostPart h;
  h.set_host(host);
  h.set_hosts_expected(2);
  h.set_local_ranks(2);
  return h;
}

v1::Envelope RegisterPart(const std::string& id, const std::string& host) {
  v1::Envelope e = protocol::NewEnvelope(1);
  v1::RegisterJob* r = e.mutable_register_job();
  r->set_job_id(id);
  r->set_model("nccl");
  v1::HostPlacement* p = r->add_placement();
  p->set_host(host);
  p->set_gpus(2);
  p->add_nics()->set_name(host + "/nic0");
  *r->mutable_host_part() = Part(host);
  return e;
}

// A part's report: one 4-rank communicator, ranks `local` here, (rank, peer rank) 150 MB each.
v1::Envelope PartReport(const std::string& id, const std::string& host, std::vector<uint32_t> local,
                        std::vector<std::pair<uint32_t, int>> bytes) {
  v1::Envelope e = Profile(id, 50, 5, true, 2);
  v1::ProfileReport* p = e.mutable_profile_report();
  *p->mutable_host_part() = Part(host);
  v1::CommTraffic* c = p->add_comms();
  c->set_comm_hash(0x5eed);
  c->set_nranks(4);
  c->set_nnodes(2);
  for (uint32_t r : local) c->add_local_ranks(r);
  for (const auto& [rank, peer] : bytes) {
    v1::RankPeerBytes* b = c->add_bytes();
    b->set_rank(rank);
    b->set_peer_rank(peer);
    b->set_bytes(150000000);
  }
  return e;
}

// One result: `gbps` measured (1 MB over the time that takes), or lost.
v1::HostProbeResult Result(const std::string& job, const v1::ProbeTarget& t, double gbps,
                           bool sender_limited = false) {
  v1::HostProbeResult r;
  r.set_job_id(job);
  r.set_src_nic(t.src_nic());
  r.set_dst_nic(t.dst_nic());
  r.set_udp_sport(t.udp_sport());
  r.set_sent(32);
  r.set_received(32);
  r.set_bytes(1000000);
  r.set_transfer_time_ns(static_cast<uint64_t>(8e6 / gbps));
  r.set_send_time_ns(r.transfer_time_ns());
  r.set_sender_limited(sender_limited);
  return r;
}

v1::Envelope ProbeReport(const std::string& host, std::vector<v1::HostProbeResult> results,
                         uint64_t rid = 50) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::HostTelemetry* t = e.mutable_host_telemetry();
  t->set_host(host);
  t->set_seq(rid);
  for (v1::HostProbeResult& r : results) *t->add_probes() = std::move(r);
  // What the transport checks before the gateway sees it.
  EXPECT_TRUE(protocol::Validate(e).ok()) << protocol::Validate(e).ToString();
  return e;
}

class HostProbesTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    Close();
    config_.faults.probes = true;
    config_.faults.min_flows = 1;  // The plan designs one probe for host0: one row suffices.
    Open();
    if (grants_) daemon_->SetKeyGrants(*grants_);
    // A 4-rank ring on host0 and host4 (two ToRs): 1 -> 2 and 3 -> 0 cross the fabric; both
    // parts registered with key_ (CURVE; "" without).
    const std::string& k = key_;
    ASSERT_TRUE(Client("agent0", RegisterPart("ring", "host0"), k).has_register_job_reply());
    ASSERT_TRUE(Client("agent4", RegisterPart("ring", "host4"), k).has_register_job_reply());
    ASSERT_TRUE(
        Client("agent0", PartReport("ring", "host0", {0, 1}, {{0, 1}, {1, 2}}), k).has_ack());
    ASSERT_TRUE(
        Client("agent4", PartReport("ring", "host4", {2, 3}, {{2, 3}, {3, 0}}), k).has_ack());
    Advance(kDebounce);
    const v1::Assignment a = LastAssignment("agent0");
    probes_.assign(a.probes().begin(), a.probes().end());
    ASSERT_FALSE(probes_.empty()) << a.DebugString();
    for (const v1::ProbeTarget& p : probes_) {
      ASSERT_EQ(p.src_nic(), "host0/nic0") << "a part gets the probes leaving its NICs";
    }
  }
  const Gateway::HostProbeCounters& Counters() { return daemon_->gateway().host_probe_counters(); }
  // Both parts' heartbeats (their leases are 1 s here).
  void KeepAlive() {
    for (const char* host : {"host0", "host4"}) {
      const std::string peer = std::string("agent") + (host + 4);
      v1::Envelope hb = Heartbeat("ring", LastAssignment(peer).epoch(), 70);
      *hb.mutable_heartbeat()->mutable_host_part() = Part(host);
      ASSERT_TRUE(Client(peer, hb).has_ack());
    }
  }

  std::vector<v1::ProbeTarget> probes_;        // host0's probes of the ring's assignment.
  std::optional<protocol::KeyGrants> grants_;  // CURVE: set before SetUp.
  std::string key_;                            // The parts' key.
};

TEST_F(HostProbesTest, SlowProbesOfTheHostsJobReachTheFaultManager) {
  std::vector<v1::HostProbeResult> slow;
  for (const v1::ProbeTarget& p : probes_) slow.push_back(Result("ring", p, 1.0));  // 1 Gb/s.
  // One report per probe round (the agent's interval, here the evaluation's): the fault manager
  // leaves out what was measured within an evaluation interval of the first evaluation that saw
  // the job's new assignment (possibly the old paths), so the third round is the first it uses.
  const int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    const v1::Envelope reply = Client("agent0", ProbeReport("host0", slow));
    ASSERT_TRUE(reply.has_ack()) << reply.DebugString();
    KeepAlive();  // A probe report is not a heartbeat: the parts' leases need theirs.
    Advance(core::Duration::Millis(config_.faults.evaluate_interval_ms / 2));
    KeepAlive();
    Advance(core::Duration::Millis(config_.faults.evaluate_interval_ms / 2));
  }
  EXPECT_EQ(Counters().accepted, kRounds * probes_.size());
  EXPECT_EQ(Counters().rejected, 0u);
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_host_probes_total{outcome=\"accepted\"} " +
                                              std::to_string(kRounds * probes_.size())));
  // The evaluation localises them and the evidence names them as host probes (the operator's).
  bool named = false;
  for (const core::LinkFaultView& v : daemon_->control().faults().Links()) {
    for (const std::string& line : v.evidence) {
      if (line.find("host probe of job ring host0/nic0->") == std::string::npos) continue;
      named = true;
      // Host agents' probes alone name no job: no empty job list in the reason.
      EXPECT_EQ(v.reason.find("jobs ,"), std::string::npos) << v.reason;
      EXPECT_EQ(v.reason.find("(jobs )"), std::string::npos) << v.reason;
    }
  }
  EXPECT_TRUE(named) << "no link's evidence names a host probe (" << probes_.size() << " probes, "
                     << daemon_->control().faults().Links().size() << " links)";
}

TEST_F(HostProbesTest, BadResultsAreRefusedWithTheirReasonAndTheAgentKeepsWorking) {
  const v1::ProbeTarget& p = probes_[0];
  auto expect_refused = [&](const std::string& peer, const v1::Envelope& report, v1::ErrorCode code,
                            const std::string& text) {
    const v1::Envelope reply = Client(peer, report);
    ASSERT_TRUE(reply.has_error()) << reply.DebugString();
    EXPECT_EQ(reply.error().code(), code) << reply.error().message();
    EXPECT_THAT(reply.error().message(), HasSubstr(text));
  };
  // Unknown job.
  expect_refused("agent0", ProbeReport("host0", {Result("nope", p, 1.0)}),
                 v1::ERROR_CODE_UNKNOWN_JOB, "host_telemetry.probes[0].job_id: unknown job 'nope'");
  // A host that has no part of the job (host1 speaking for the ring, from its own NIC).
  v1::ProbeTarget from_host1 = p;
  from_host1.set_src_nic("host1/nic0");
  expect_refused("agent1", ProbeReport("host1", {Result("ring", from_host1, 1.0)}),
                 v1::ERROR_CODE_PERMISSION_DENIED,
                 "job 'ring' has no part on host 'host1' (a host agent reports probes only for "
                 "the jobs it has parts of)");
  // Another connection than the part's (without CURVE the connection is the identity).
  expect_refused("intruder", ProbeReport("host0", {Result("ring", p, 1.0)}),
                 v1::ERROR_CODE_PERMISSION_DENIED,
                 "the part of job 'ring' on host 'host0' is spoken for by another connection");
  // Another host's NIC as the source.
  v1::ProbeTarget foreign = p;
  foreign.set_src_nic("host1/nic0");
  expect_refused("agent0", ProbeReport("host0", {Result("ring", foreign, 1.0)}),
                 v1::ERROR_CODE_PERMISSION_DENIED,
                 "host_telemetry.probes[0].src_nic: 'host1/nic0' is not a NIC of 'host0'");
  // A destination the topology does not have.
  v1::ProbeTarget nowhere = p;
  nowhere.set_dst_nic("host99/nic0");
  expect_refused("agent0", ProbeReport("host0", {Result("ring", nowhere, 1.0)}),
                 v1::ERROR_CODE_INVALID_ARGUMENT,
                 "host_telemetry.probes[0].dst_nic: 'host99/nic0' is not a NIC of the topology");
  // An unknown reporting host refuses the whole report.
  expect_refused("agent0", ProbeReport("host99", {Result("ring", p, 1.0)}),
                 v1::ERROR_CODE_UNKNOWN_HOST, "host_telemetry.host");
  EXPECT_EQ(Counters().accepted, 0u);
  EXPECT_EQ(Counters().rejected, 5u);
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"host_probe\"} 5"));

  // A good result next to a bad one: the good one counts, the report is acknowledged.
  const v1::Envelope mixed =
      Client("agent0", ProbeReport("host0", {Result("nope", p, 1.0), Result("ring", p, 1.0)}));
  EXPECT_TRUE(mixed.has_ack()) << mixed.DebugString();
  EXPECT_EQ(Counters().accepted, 1u);
  EXPECT_EQ(Counters().rejected, 6u);

  // Not a probe of the assignment in force (another port: an older plan's) is stale, not an
  // error; a sender-limited train below the gray ratio is no evidence; one at the path's nominal
  // rate counts (healthy).
  v1::ProbeTarget old = p;
  old.set_udp_sport(p.udp_sport() == 65535 ? 1 : p.udp_sport() + 1);
  bool planned = false;
  for (const v1::ProbeTarget& q : probes_) planned = planned || q.udp_sport() == old.udp_sport();
  if (!planned) {
    EXPECT_TRUE(Client("agent0", ProbeReport("host0", {Result("ring", old, 1.0)})).has_ack());
    EXPECT_EQ(Counters().stale, 1u);
  }
  EXPECT_TRUE(
      Client("agent0", ProbeReport("host0", {Result("ring", p, 5.0, /*sender_limited=*/true)}))
          .has_ack());
  EXPECT_EQ(Counters().sender_limited, 1u);
  EXPECT_EQ(Counters().accepted, 1u);
  EXPECT_TRUE(
      Client("agent0", ProbeReport("host0", {Result("ring", p, 1600.0, /*sender_limited=*/true)}))
          .has_ack());
  EXPECT_EQ(Counters().accepted, 2u);

  // The agent's other reports still work: NIC counters and the part's heartbeat.
  EXPECT_TRUE(Client("agent0", NicReport("host0", 60)).has_ack());
  v1::Envelope hb = Heartbeat("ring", LastAssignment("agent0").epoch(), 61);
  *hb.mutable_heartbeat()->mutable_host_part() = Part("host0");
  EXPECT_TRUE(Client("agent0", hb).has_ack());
}

// With CURVE: only a host key may send host telemetry at all, and of the host keys authorised
// for the host only the one that registered the job's part may report its probes (the hosts of a
// multi-host job share one key; another key for the same host is not the job's agent).
class HostProbesCurveTest : public HostProbesTest {
 protected:
  static constexpr const char* kShared = "hostkey-shared-by-host0-and-host4";
  static constexpr const char* kOther = "hostkey-of-another-host0-agent";
  static constexpr const char* kTenant = "jobkey-of-a-tenant";
  HostProbesCurveTest() {
    protocol::KeyGrants g;
    g[kShared] = {protocol::KeyRole::kHost, "ring-hosts", {}, {"host0", "host4"}};
    g[kOther] = {protocol::KeyRole::kHost, "host0-b", {}, {"host0"}};
    g[kTenant] = {protocol::KeyRole::kJob, "tenant", {}, {}};
    grants_ = g;
    key_ = kShared;
  }
};

TEST_F(HostProbesCurveTest, OnlyThePartsKeyReportsItsProbes) {
  const v1::Envelope report = ProbeReport("host0", {Result("ring", probes_[0], 1.0)});
  v1::Envelope r = Client("tenant", report, kTenant);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("host_telemetry: this CURVE key is a job key"));
  r = Client("agent0", report, kOther);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(),
              HasSubstr("host_telemetry.probes[0].job_id: the part of job 'ring' on host 'host0' "
                        "was registered with another CURVE key"));
  EXPECT_EQ(Counters().accepted, 0u);
  EXPECT_TRUE(Client("agent0", report, kShared).has_ack());
  EXPECT_EQ(Counters().accepted, 1u);
}

}  // namespace
}  // namespace crux::daemon::testing
