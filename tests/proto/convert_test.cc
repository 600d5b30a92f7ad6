#include "crux/protocol/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "crux/core/topology/builders.h"
#include "crux/protocol/validate.h"

namespace crux::protocol {
namespace {

using ::testing::HasSubstr;

bool Refused(const ProtocolError& e) { return e.code != v1::ERROR_CODE_UNSPECIFIED; }

core::SwitchQosState SmallState() {
  core::SwitchQosState s;
  s.switch_name = "tor0";
  for (int d = 0; d < 64; ++d) s.dscp_to_tc[d] = 0;
  s.dscp_to_tc[10] = 3;
  s.dscp_to_tc[48] = 6;
  s.tc_to_queue = {{0, 0}, {3, 3}, {6, 6}};
  s.schedulers = {{0, core::SchedulerType::kDwrr, 40},
                  {3, core::SchedulerType::kStrict, 0},
                  {6, core::SchedulerType::kStrict, 0}};
  s.pfc_enable = {3};
  return s;
}

TEST(ConvertTest, JobStateNamesAreLowerCaseAndTotal) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_REGISTERED), "registered");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_PROFILING), "profiling");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_SCHEDULED), "scheduled");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_GONE), "gone");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(99)), "unspecified");
}

TEST(ConvertTest, SwitchStateRoundTripsAndCarriesTheEpoch) {
  const core::SwitchQosState s = SmallState();
  const v1::SwitchQosState p = SwitchQosStateToProto(s, 42);
  EXPECT_EQ(p.epoch(), 42u);
  EXPECT_EQ(p.switch_name(), "tor0");
  EXPECT_EQ(p.dscp_to_tc().at(10), 3u);
  auto back = SwitchQosStateFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(ConvertTest, InvalidWireStateIsRefusedNamingTheField) {
  v1::SwitchQosState p = SwitchQosStateToProto(SmallState(), 1);
  p.mutable_schedulers(1)->set_type("WRR");
  EXPECT_THAT(SwitchQosStateFromProto(p).status().message(),
              HasSubstr("switch_state.schedulers[1].type"));
  p = SwitchQosStateToProto(SmallState(), 1);
  (*p.mutable_dscp_to_tc())[4000000000u] = 1;  // Clamped, then rejected, never wrapped.
  EXPECT_FALSE(SwitchQosStateFromProto(p).ok());
}

TEST(ConvertTest, EnforcementCheckRoundTripsAndItsDetailIsAlwaysSendable) {
  core::EnforcementCheck c;
  c.status = core::EnforcementStatus::kMismatch;
  c.detail = "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14): dscp 10 -> tc 0, the plan says tc 5";
  c.maps_checked = 4;
  c.queues_checked = 16;
  c.checked_unix_ms = 1764480000000;
  c.epoch = 9;
  const v1::EnforcementCheck p = EnforcementCheckToProto(c);
  EXPECT_EQ(p.status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  EXPECT_EQ(EnforcementCheckFromProto(p), c);
  c.status = core::EnforcementStatus::kMatch;
  c.detail.clear();
  EXPECT_EQ(EnforcementCheckFromProto(EnforcementCheckToProto(c)), c);
  EXPECT_EQ(EnforcementCheckFromProto(EnforcementCheckToProto(core::EnforcementCheck{})),
            core::EnforcementCheck{});
  v1::EnforcementCheck odd;
  odd.set_status(static_cast<v1::EnforcementStatus>(9));
  EXPECT_EQ(EnforcementCheckFromProto(odd).status, core::EnforcementStatus::kUnknown);

  // Device data quoted in a detail may hold any byte: escaped (once), cut, always valid.
  core::EnforcementCheck bad;
  bad.detail = "ASIC_DB row: \x1b[2J\n\xff" + std::string(2000, 'y');
  v1::Envelope hello = NewEnvelope(1);
  hello.mutable_switch_hello()->set_switch_name("tor0");
  *hello.mutable_switch_hello()->mutable_enforcement() = EnforcementCheckToProto(bad);
  EXPECT_TRUE(Validate(hello).ok()) << Validate(hello).ToString();
  const std::string sent = hello.switch_hello().enforcement().detail();
  EXPECT_THAT(sent, HasSubstr("ASIC_DB row: \\x1b[2J\\x0a\\xffyyy"));
  EXPECT_EQ(sent.substr(sent.size() - 4), " ...");
  EXPECT_LT(sent.size(), 600u);
  // Long printable text is sent whole up to the limit, then cut.
  core::EnforcementCheck text;
  text.detail = std::string(1500, 'z');
  EXPECT_EQ(EnforcementCheckToProto(text).detail(), text.detail);
  text.detail = std::string(3000, 'z');
  EXPECT_EQ(EnforcementCheckToProto(text).detail(), std::string(512, 'z') + " ...");
  // Printable text is not escaped again on the next hop (agent -> cruxd -> cruxctl).
  EXPECT_EQ(EnforcementCheckToProto(EnforcementCheckFromProto(hello.switch_hello().enforcement()))
                .detail(),
            sent);
}

// The per-job name cache: a report that names the same NICs converts to exactly what a cold
// conversion gives, a changed name is resolved and checked again, and a refused report leaves
// the cache as it was.
TEST(ConvertTest, PeerNameCacheGivesTheColdResultAndRechecksChangedNames) {
  core::Clos2Params cp;
  cp.host.nics_per_host = 2;
  auto topo = core::BuildClos2(cp);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  v1::RegisterJob reg;
  reg.set_job_id("j");
  for (const char* h : {"host0", "host1"}) {
    v1::HostPlacement* p = reg.add_placement();
    p->set_host(h);
    p->set_gpus(1);
  }
  core::JobDemand demand;
  ASSERT_FALSE(Refused(DemandFromProto(reg, *topo, &demand)));
  v1::ProfileReport rep;
  rep.set_job_id("j");
  rep.set_compute_time_ns(1000);
  rep.set_iteration_period_ns(2000);
  rep.set_samples(1);
  for (auto [a, b] :
       {std::pair{"host0/nic0", "host1/nic0"}, std::pair{"host0/nic1", "host1/nic1"}}) {
    v1::PeerBytes* pb = rep.add_peers();
    pb->set_local_nic(a);
    pb->set_remote_nic(b);
    pb->set_bytes(100);
  }
  core::JobProfile cold;
  ASSERT_FALSE(Refused(ProfileFromProto(rep, *topo, demand, &cold)));
  PeerNameCache cache;
  core::JobProfile first;
  core::JobProfile again;
  ASSERT_FALSE(Refused(ProfileFromProto(rep, *topo, demand, &first, &cache)));
  ASSERT_EQ(cache.names.size(), 4u);
  ASSERT_FALSE(Refused(ProfileFromProto(rep, *topo, demand, &again, &cache)));
  EXPECT_EQ(first, cold);
  EXPECT_EQ(again, cold);
  // A name that changed is resolved again...
  rep.mutable_peers(1)->set_remote_nic("host1/nic0");
  core::JobProfile changed;
  ASSERT_FALSE(Refused(ProfileFromProto(rep, *topo, demand, &changed, &cache)));
  EXPECT_EQ(changed.peers[1].remote_nic, *topo->FindNode("host1/nic0"));
  EXPECT_EQ(cache.names[3], "host1/nic0");
  // ...and checked: a NIC of another host is refused even after cached positions, and the
  // cache keeps the last accepted names.
  rep.mutable_peers(1)->set_remote_nic("host2/nic0");
  core::JobProfile refused;
  ProtocolError bad = ProfileFromProto(rep, *topo, demand, &refused, &cache);
  EXPECT_EQ(bad.code, v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(bad.message, HasSubstr("profile_report.peers[1].remote_nic"));
  EXPECT_EQ(cache.names[3], "host1/nic0");
}

// crux-hostd's NIC counters: summed into loss and congestion per NIC; the host speaks only
// for its own NICs; a NIC the topology does not know is skipped and named.
TEST(ConvertTest, HostTelemetryBecomesNicSignalsOfThatHostsNicsOnly) {
  core::Clos2Params cp;
  cp.host.nics_per_host = 2;
  auto topo = core::BuildClos2(cp);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  v1::HostTelemetry t;
  t.set_host("host1");
  v1::NicCounters* n = t.add_nics();
  n->set_nic("host1/nic1");
  n->set_device("mlx5_1");
  n->set_port(1);
  n->set_interval_ns(500000000);
  n->set_packet_seq_err(1);
  n->set_out_of_sequence(2);
  n->set_local_ack_timeout_err(4);
  n->set_roce_adp_retrans(8);
  n->set_roce_adp_retrans_to(16);
  n->set_np_cnp_sent(100);
  n->set_rp_cnp_handled(200);
  n->set_np_ecn_marked_roce_packets(400);
  t.add_nics()->set_nic("host1/nic7");  // Not in the topology.
  NicSignals sig;
  ASSERT_FALSE(Refused(NicSignalsFromProto(t, *topo, &sig)));
  ASSERT_EQ(sig.nics.size(), 1u);
  EXPECT_EQ(sig.nics[0].nic, *topo->FindNode("host1/nic1"));
  EXPECT_EQ(sig.nics[0].interval, core::Duration::Millis(500));
  EXPECT_EQ(sig.nics[0].loss, 31u);
  EXPECT_EQ(sig.nics[0].congestion, 700u);
  EXPECT_EQ(sig.nics[0].source, "host1 mlx5_1 port 1");
  ASSERT_EQ(sig.ignored.size(), 1u);
  EXPECT_THAT(sig.ignored[0], HasSubstr("host1/nic7"));

  // Sums saturate instead of wrapping.
  n->set_out_of_sequence(std::numeric_limits<uint64_t>::max());
  ASSERT_FALSE(Refused(NicSignalsFromProto(t, *topo, &sig)));
  EXPECT_EQ(sig.nics[0].loss, std::numeric_limits<uint64_t>::max());

  // Another host's NIC: refused, naming the field.
  v1::HostTelemetry other = t;
  other.mutable_nics(0)->set_nic("host2/nic0");
  ProtocolError bad = NicSignalsFromProto(other, *topo, &sig);
  EXPECT_EQ(bad.code, v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(bad.message, HasSubstr("host_telemetry.nics[0].nic: 'host2/nic0' is a NIC of "
                                     "'host2', not of 'host1'"));
  // A host name that is not a host (a switch, or nothing).
  other = t;
  other.set_host("tor0");
  bad = NicSignalsFromProto(other, *topo, &sig);
  EXPECT_EQ(bad.code, v1::ERROR_CODE_UNKNOWN_HOST);
  EXPECT_THAT(bad.message, HasSubstr("host_telemetry.host: 'tor0'"));
}

}  // namespace
}  // namespace crux::protocol
