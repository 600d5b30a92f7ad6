// Host probe results end to end over real ZeroMQ (issue #27): a real cruxd (faults.probes on) and
// a test harness that speaks for two hosts as crux-hostd does on the wire (a DEALER per host:
// RegisterJob and ProfileReport with a HostPart, the Assignment pushes, HostTelemetry.probes).
// The harness reports every probe of host0's part slow (1 Gb/s against 100-400 Gb/s links, not
// sender-limited: numbers a real train on a degraded path would give, which loopback cannot
// produce); cruxd must take them as host-measured samples and `cruxctl faults` must show them
// as evidence of a suspect link (faults.min_flows 1: the plan designs one probe for host0), with
// crux_host_probes_total{outcome="accepted"} in /metrics. Bad reports (a result that cannot be a
// train's, an unknown job) are refused with the field and the reason, and the same agent's other
// reports keep working. The real crux-hostd's own trains (loopback) are covered by
// tests/hostd/hostd_e2e_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "cruxd_harness.h"
#include "http_get.h"
#include "process_util.h"

namespace crux::system_test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr core::Duration kCall = core::Duration::Millis(5000);

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

// A 4-rank ring over the two hosts: this host's two ranks, the crossing one sends 150 MB.
v1::Envelope PartReport(const std::string& id, const std::string& host, uint32_t first_rank) {
  v1::Envelope e = protocol::NewEnvelope(2);
  v1::ProfileReport* p = e.mutable_profile_report();
  p->set_job_id(id);
  p->set_compute_time_ns(50000000);
  p->set_iteration_period_ns(100000000);
  p->set_overlap_start(1);
  p->set_samples(5);
  p->set_converged(true);
  *p->mutable_host_part() = Part(host);
  v1::CommTraffic* c = p->add_comms();
  c->set_comm_hash(0x5eed);
  c->set_nranks(4);
  c->set_nnodes(2);
  c->add_local_ranks(first_rank);
  c->add_local_ranks(first_rank + 1);
  for (uint32_t r : {first_rank, first_rank + 1}) {
    v1::RankPeerBytes* b = c->add_bytes();
    b->set_rank(r);
    b->set_peer_rank(static_cast<int32_t>((r + 1) % 4));
    b->set_bytes(150000000);
  }
  return e;
}

v1::HostProbeResult Slow(const std::string& job, const v1::ProbeTarget& t) {
  v1::HostProbeResult r;
  r.set_job_id(job);
  r.set_src_nic(t.src_nic());
  r.set_dst_nic(t.dst_nic());
  r.set_udp_sport(t.udp_sport());
  r.set_sent(32);
  r.set_received(32);
  r.set_bytes(31 * 1472);
  r.set_transfer_time_ns(31 * 1472 * 8);  // 1 Gb/s.
  r.set_send_time_ns(50000);              // Sent 7 x faster: the path stretched the train.
  return r;
}

v1::Envelope ProbeReport(const std::string& host, const std::vector<v1::HostProbeResult>& rs) {
  v1::Envelope e = protocol::NewEnvelope(3);
  v1::HostTelemetry* t = e.mutable_host_telemetry();
  t->set_host(host);
  t->set_seq(1);
  for (const v1::HostProbeResult& r : rs) *t->add_probes() = r;
  return e;
}

class HostProbesE2eTest : public ::testing::Test {
 protected:
  std::unique_ptr<protocol::DealerClient> Agent() {
    protocol::ClientOptions o;
    o.endpoint = cruxd_.endpoint();
    auto c = protocol::DealerClient::Connect(ctx_, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // The reply to `m`, or an Error envelope saying why none came.
  v1::Envelope Call(protocol::DealerClient& c, const v1::Envelope& m) {
    auto r = c.Call(m, kCall);
    if (r.ok()) return *r;
    v1::Envelope e;
    e.mutable_error()->set_message(r.status().ToString());
    return e;
  }

  TempDir dir_{"crux_host_probes_e2e"};
  CruxdHarness cruxd_{dir_.path()};
  protocol::TransportContext ctx_;
};

TEST_F(HostProbesE2eTest, SlowHostProbesReachCruxdAndShowInCruxctlFaults) {
  const int metrics_port = FreeTcpPort();
  ASSERT_GT(metrics_port, 0);
  cruxd_.WriteConfig(
      "faults:\n  probes: true\n  min_flows: 1\n  evaluate_interval_ms: 200\n"
      "  evidence_window_ms: 5000\n"
      "metrics_listen: \"127.0.0.1:" +
      std::to_string(metrics_port) + "\"\nlog_level: info\n");
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  auto agent0 = Agent();
  auto agent4 = Agent();
  ASSERT_TRUE(agent0 && agent4);
  const std::string job = "probe-e2e";
  ASSERT_TRUE(Call(*agent0, RegisterPart(job, "host0")).has_register_job_reply());
  ASSERT_TRUE(Call(*agent4, RegisterPart(job, "host4")).has_register_job_reply());
  ASSERT_TRUE(Call(*agent0, PartReport(job, "host0", 0)).has_ack());
  ASSERT_TRUE(Call(*agent4, PartReport(job, "host4", 2)).has_ack());

  // The plan's assignment for host0's part carries the probes leaving host0's NIC.
  std::vector<v1::ProbeTarget> probes;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto m = agent0->Receive(core::Duration::Millis(100));
        if (m.ok() && m->has_value() && (*m)->has_assignment()) {
          const v1::Assignment& a = (*m)->assignment();
          probes.assign(a.probes().begin(), a.probes().end());
        }
        return !probes.empty();
      },
      seconds(20), milliseconds(1)))
      << cruxd_.LastLog();
  for (const v1::ProbeTarget& p : probes) ASSERT_EQ(p.src_nic(), "host0/nic0");

  // Bad reports over the wire: refused with the field (the transport's validation) or the
  // reason (the gateway), counted; nothing else of the agent's changes.
  v1::HostProbeResult impossible = Slow(job, probes[0]);
  impossible.set_received(33);  // Of 32 sent.
  v1::Envelope bad = Call(*agent0, ProbeReport("host0", {impossible}));
  ASSERT_TRUE(bad.has_error()) << bad.DebugString();
  EXPECT_NE(bad.error().message().find("host_telemetry.probes[0].received"), std::string::npos)
      << bad.error().message();
  bad = Call(*agent0, ProbeReport("host0", {Slow("no-such-job", probes[0])}));
  ASSERT_TRUE(bad.has_error()) << bad.DebugString();
  EXPECT_EQ(bad.error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
  EXPECT_NE(bad.error().message().find("unknown job 'no-such-job'"), std::string::npos)
      << bad.error().message();

  // The slow results, re-sent as an agent's rounds would be, until cruxctl shows them.
  std::vector<v1::HostProbeResult> slow;
  for (const v1::ProbeTarget& p : probes) slow.push_back(Slow(job, p));
  json faults;
  std::string evidence;
  const bool shown = WaitUntil(
      [&] {
        const v1::Envelope ack = Call(*agent0, ProbeReport("host0", slow));
        if (!ack.has_ack()) {
          evidence = "report not acknowledged: " + ack.DebugString();
          return false;
        }
        faults = cruxd_.CruxctlJson({"faults"});
        for (const auto& l : faults.value("links", json::array())) {
          for (const auto& line : l.value("evidence", json::array())) {
            const std::string text = line.get<std::string>();
            if (text.find("host probe of job " + job + " host0/nic0->") != std::string::npos) {
              evidence = l["link"].get<std::string>() + ": " + l["reason"].get<std::string>();
              return true;
            }
          }
        }
        return false;
      },
      seconds(20), milliseconds(200));
  ASSERT_TRUE(shown) << evidence << "\n" << faults.dump(2) << "\n" << cruxd_.LastLog();
  std::cout << "host probes shown by cruxctl faults: " << evidence << "\n";
  std::string text;
  EXPECT_TRUE(WaitUntil(
      [&] {
        text = ::crux::test::HttpGet(metrics_port, "/metrics");
        return text.find("crux_host_probes_total{outcome=\"accepted\"} 0") == std::string::npos &&
               text.find("crux_host_probes_total{outcome=\"accepted\"}") != std::string::npos &&
               text.find("crux_host_probes_total{outcome=\"rejected\"} 1") != std::string::npos;
      },
      seconds(10), milliseconds(200)))
      << text;
  // The agent's other reports still work.
  v1::Envelope hb = protocol::NewEnvelope(4);
  hb.mutable_heartbeat()->set_job_id(job);
  hb.mutable_heartbeat()->set_seq(1);
  *hb.mutable_heartbeat()->mutable_host_part() = Part("host0");
  EXPECT_TRUE(Call(*agent0, hb).has_ack());
}

}  // namespace
}  // namespace crux::system_test
