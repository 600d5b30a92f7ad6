#include "crux/protocol/validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "crux/protocol/codec.h"

namespace crux::protocol {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

v1::Envelope GoodRegister() {
  v1::Envelope m = NewEnvelope(1);
  auto* r = m.mutable_register_job();
  r->set_job_id("tenant-a/job.1");
  r->set_tenant("tenant-a");
  auto* h = r->add_placement();
  h->set_host("host0");
  h->set_gpus(8);
  h->add_nics()->set_name("host0/nic0");
  auto* h2 = r->add_placement();
  h2->set_host("host1");
  h2->set_gpus(8);
  auto* qp = r->add_qps();
  qp->set_local_nic("host0/nic0");
  qp->set_remote_nic("host1/nic0");
  r->set_pattern("ring_allreduce");
  r->set_bytes_per_iteration(1 << 30);
  r->set_lease_ms(3000);
  return m;
}

v1::Envelope GoodProfile() {
  v1::Envelope m = NewEnvelope(2);
  auto* p = m.mutable_profile_report();
  p->set_job_id("job-a");
  p->set_compute_time_ns(100'000'000);
  p->set_flops_per_iteration(1e15);
  p->set_iteration_period_ns(150'000'000);
  p->set_overlap_start(0.5);
  p->set_compression_ratio(1.0);
  p->set_samples(10);
  auto* peer = p->add_peers();
  peer->set_local_nic("host0/nic0");
  peer->set_remote_nic("host1/nic0");
  peer->set_bytes(1000);
  return m;
}

v1::Envelope GoodAssignment() {
  v1::Envelope m = NewEnvelope(0);
  auto* a = m.mutable_assignment();
  a->set_job_id("job-a");
  a->set_epoch(3);
  a->set_level(1);
  a->set_dscp(26);
  a->set_traffic_class(26 << 2);
  a->set_state(v1::JOB_STATE_SCHEDULED);
  auto* f = a->add_flows();
  f->set_src_nic("host0/nic0");
  f->set_dst_nic("host1/nic0");
  f->set_udp_sport(49152);
  f->add_path("host0/nic0");
  f->add_path("tor0");
  (*a->mutable_nccl_env())["NCCL_IB_TC"] = "104";
  return m;
}

v1::Envelope GoodSwitchState() {
  v1::Envelope m = NewEnvelope(0);
  auto* s = m.mutable_switch_state();
  s->set_switch_name("tor0");
  s->set_epoch(1);
  (*s->mutable_dscp_to_tc())[26] = 3;
  (*s->mutable_tc_to_queue())[3] = 3;
  auto* q = s->add_schedulers();
  q->set_queue(3);
  q->set_type("STRICT");
  auto* q2 = s->add_schedulers();
  q2->set_queue(0);
  q2->set_type("DWRR");
  q2->set_weight(50);
  s->add_ports("Ethernet0");
  s->add_pfc_enable(3);
  return m;
}

// Applies `mutate` to a copy of `good` and expects INVALID_ARGUMENT naming `field`.
void ExpectInvalid(const v1::Envelope& good, const std::function<void(v1::Envelope&)>& mutate,
                   const std::string& field) {
  ASSERT_TRUE(Validate(good).ok()) << Validate(good).ToString();
  v1::Envelope bad = good;
  mutate(bad);
  core::Status st = Validate(bad);
  ASSERT_FALSE(st.ok()) << "expected an error naming " << field;
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind(field + ":", 0), 0u)
      << "message \"" << st.message() << "\" does not start with " << field;
}

TEST(ValidateTest, IdGrammar) {
  EXPECT_TRUE(IsValidId("host3/nic0"));
  EXPECT_TRUE(IsValidId("job:a_b-c.d"));
  EXPECT_FALSE(IsValidId(""));
  EXPECT_FALSE(IsValidId("a b"));
  EXPECT_FALSE(IsValidId("a\nb"));
  EXPECT_FALSE(IsValidId("ünï"));
  EXPECT_FALSE(IsValidId(std::string(kMaxIdLength + 1, 'a')));
  EXPECT_TRUE(IsValidId(std::string(kMaxIdLength, 'a')));
}

TEST(ValidateTest, GoodMessagesPass) {
  for (const v1::Envelope& m :
       {GoodRegister(), GoodProfile(), GoodAssignment(), GoodSwitchState(), MakeAck(1, "job-a", 2),
        MakeError(1, v1::ERROR_CODE_UNKNOWN_JOB, "no such job")}) {
    EXPECT_TRUE(Validate(m).ok()) << BodyName(m) << ": " << Validate(m).ToString();
  }
  v1::Envelope status = NewEnvelope(3);
  status.mutable_status_request();
  EXPECT_TRUE(Validate(status).ok());
}

TEST(ValidateTest, OnlyReportsAndTelemetryMayBeQuiet) {
  v1::Envelope report = GoodProfile();
  report.set_quiet(true);
  EXPECT_TRUE(Validate(report).ok()) << Validate(report).ToString();
  v1::Envelope heartbeat = NewEnvelope(4);
  heartbeat.mutable_heartbeat()->set_job_id("job-a");
  heartbeat.set_quiet(true);
  EXPECT_TRUE(Validate(heartbeat).ok()) << Validate(heartbeat).ToString();
  // Requests whose reply carries what the sender needs, and replies and pushes, may not be.
  v1::Envelope status = NewEnvelope(3);
  status.mutable_status_request();
  for (v1::Envelope m : {GoodRegister(), GoodAssignment(), MakeAck(1, "job-a", 2), status}) {
    m.set_quiet(true);
    const core::Status st = Validate(m);
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument) << BodyName(m);
    EXPECT_EQ(st.message().rfind("envelope.quiet: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(std::string(BodyName(m))), std::string::npos) << st.message();
  }
}

TEST(ValidateTest, MissingBody) {
  core::Status st = Validate(NewEnvelope(1));
  EXPECT_EQ(st.message(), "envelope.body: missing");
}

TEST(ValidateTest, RegisterJobBadValues) {
  const v1::Envelope g = GoodRegister();
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_job_id(""); }, "register_job.job_id");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_job_id("bad id!"); }, "register_job.job_id");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_job_id(std::string(200, 'x')); },
      "register_job.job_id");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_tenant("a b"); }, "register_job.tenant");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->clear_placement(); }, "register_job.placement");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->mutable_placement(1)->set_host(""); },
      "register_job.placement[1].host");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->mutable_placement(1)->set_host("host0"); },
      "register_job.placement[1].host");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->mutable_placement(0)->set_gpus(0); },
      "register_job.placement[0].gpus");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->mutable_placement(0)->set_gpus(1u << 31); },
      "register_job.placement[0].gpus");
  ExpectInvalid(
      g,
      [](auto& m) {
        m.mutable_register_job()->mutable_placement(0)->mutable_nics(0)->set_name("nic 0");
      },
      "register_job.placement[0].nics[0].name");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->mutable_qps(0)->set_remote_nic(""); },
      "register_job.qps[0].remote_nic");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_pattern("broadcast"); },
      "register_job.pattern");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_bytes_per_iteration(~uint64_t{0}); },
      "register_job.bytes_per_iteration");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_lease_ms(5); }, "register_job.lease_ms");
  ExpectInvalid(
      g, [](auto& m) { m.mutable_register_job()->set_model(std::string(10000, 'm')); },
      "register_job.model");
}

TEST(ValidateTest, ProfileReportBadValues) {
  const v1::Envelope g = GoodProfile();
  auto p = [](v1::Envelope& m) { return m.mutable_profile_report(); };
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_job_id(""); }, "profile_report.job_id");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_compute_time_ns(0); }, "profile_report.compute_time_ns");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_compute_time_ns(~uint64_t{0}); },
      "profile_report.compute_time_ns");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_flops_per_iteration(kNaN); },
      "profile_report.flops_per_iteration");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_flops_per_iteration(kInf); },
      "profile_report.flops_per_iteration");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_flops_per_iteration(-1.0); },
      "profile_report.flops_per_iteration");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_flops_per_iteration(1e300); },
      "profile_report.flops_per_iteration");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_iteration_period_ns(0); }, "profile_report.iteration_period_ns");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_overlap_start(kNaN); }, "profile_report.overlap_start");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_overlap_start(-0.1); }, "profile_report.overlap_start");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_overlap_start(1.5); }, "profile_report.overlap_start");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_compression_ratio(-kInf); }, "profile_report.compression_ratio");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_compression_ratio(1e6); }, "profile_report.compression_ratio");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->set_samples(0); }, "profile_report.samples");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->mutable_peers(0)->set_local_nic("a b"); },
      "profile_report.peers[0].local_nic");
  ExpectInvalid(
      g, [&](auto& m) { p(m)->mutable_peers(0)->set_bytes(~uint64_t{0}); },
      "profile_report.peers[0].bytes");
  // The exact message the issue uses as an example.
  v1::Envelope bad = g;
  p(bad)->set_compute_time_ns(0);
  EXPECT_EQ(Validate(bad).message(), "profile_report.compute_time_ns: must be > 0");
}

TEST(ValidateTest, HeartbeatEndJobAckErrorBadValues) {
  v1::Envelope hb = NewEnvelope(1);
  hb.mutable_heartbeat()->set_job_id("job-a");
  ExpectInvalid(
      hb, [](auto& m) { m.mutable_heartbeat()->set_job_id(""); }, "heartbeat.job_id");
  ExpectInvalid(
      hb, [](auto& m) { m.mutable_heartbeat()->set_job_id("\x01"); }, "heartbeat.job_id");
  // Flow stats (fuzz defect 7: the path of a flow's field named a destroyed parent).
  v1::FlowStats* fs = hb.mutable_heartbeat()->add_flows();
  fs->set_src_nic("host0/nic0");
  fs->set_dst_nic("host1/nic0");
  fs->set_bytes(1000);
  fs->set_window_ns(1000000);
  fs->set_transfer_time_ns(500000);
  ExpectInvalid(
      hb, [](auto& m) { m.mutable_heartbeat()->mutable_flows(0)->set_bytes(uint64_t{1} << 51); },
      "heartbeat.flows[0].bytes");
  ExpectInvalid(
      hb, [](auto& m) { m.mutable_heartbeat()->mutable_flows(0)->set_window_ns(0); },
      "heartbeat.flows[0].window_ns");

  v1::Envelope end = NewEnvelope(1);
  end.mutable_end_job()->set_job_id("job-a");
  ExpectInvalid(
      end, [](auto& m) { m.mutable_end_job()->set_job_id(""); }, "end_job.job_id");
  ExpectInvalid(
      end, [](auto& m) { m.mutable_end_job()->set_reason(std::string(5000, 'r')); },
      "end_job.reason");

  const v1::Envelope ack = MakeAck(0, "job-a", 1);
  ExpectInvalid(
      ack, [](auto& m) { m.mutable_ack()->set_job_id("job a"); }, "ack.job_id");
  ExpectInvalid(
      ack, [](auto& m) { m.mutable_ack()->set_error(std::string(5000, 'e')); }, "ack.error");

  const v1::Envelope err = MakeError(1, v1::ERROR_CODE_INTERNAL, "boom");
  ExpectInvalid(
      err, [](auto& m) { m.mutable_error()->set_code(v1::ERROR_CODE_UNSPECIFIED); }, "error.code");
  ExpectInvalid(
      err, [](auto& m) { m.mutable_error()->set_code(static_cast<v1::ErrorCode>(999)); },
      "error.code");

  v1::Envelope reply = NewEnvelope(1);
  reply.mutable_register_job_reply()->set_job_id("job-a");
  ExpectInvalid(
      reply, [](auto& m) { m.mutable_register_job_reply()->set_dscp(64); },
      "register_job_reply.dscp");
}

// Issue #28: a batch names each entry's field by index; empty, oversized and duplicate-job
// batches are refused.
TEST(ValidateTest, AssignmentAndAckBatches) {
  v1::Envelope g = NewEnvelope(0);
  for (const char* job : {"job-a", "job-b"}) {
    v1::Assignment* a = g.mutable_assignment_batch()->add_assignments();
    *a = GoodAssignment().assignment();
    a->set_job_id(job);
  }
  auto b = [](v1::Envelope& m) { return m.mutable_assignment_batch(); };
  ExpectInvalid(
      g, [&](auto& m) { b(m)->mutable_assignments(1)->set_dscp(64); },
      "assignment_batch.assignments[1].dscp");
  ExpectInvalid(
      g, [&](auto& m) { b(m)->mutable_assignments(1)->mutable_flows(0)->set_src_nic(""); },
      "assignment_batch.assignments[1].flows[0].src_nic");
  ExpectInvalid(
      g, [&](auto& m) { b(m)->mutable_assignments(1)->set_job_id("job-a"); },
      "assignment_batch.assignments");
  ExpectInvalid(
      g, [&](auto& m) { b(m)->clear_assignments(); }, "assignment_batch.assignments");
  ExpectInvalid(
      g,
      [&](auto& m) {
        b(m)->clear_assignments();
        for (size_t i = 0; i <= kMaxBatchAssignments; ++i) {
          v1::Assignment* a = b(m)->add_assignments();
          a->set_job_id("job-" + std::to_string(i));
        }
      },
      "assignment_batch.assignments");

  v1::Envelope acks = NewEnvelope(0);
  for (const char* job : {"job-a", "job-b"}) {
    v1::Ack* a = acks.mutable_ack_batch()->add_acks();
    a->set_job_id(job);
    a->set_epoch(3);
    a->set_ok(true);
  }
  auto k = [](v1::Envelope& m) { return m.mutable_ack_batch(); };
  ExpectInvalid(
      acks, [&](auto& m) { k(m)->mutable_acks(1)->set_job_id("a b"); }, "ack_batch.acks[1].job_id");
  ExpectInvalid(
      acks,
      [&](auto& m) { k(m)->mutable_acks(0)->set_error(std::string(kMaxTextLength + 1, 'x')); },
      "ack_batch.acks[0].error");
  ExpectInvalid(
      acks, [&](auto& m) { k(m)->clear_acks(); }, "ack_batch.acks");
}

TEST(ValidateTest, AssignmentBadValues) {
  const v1::Envelope g = GoodAssignment();
  auto a = [](v1::Envelope& m) { return m.mutable_assignment(); };
  ExpectInvalid(
      g, [&](auto& m) { a(m)->set_job_id(""); }, "assignment.job_id");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->set_dscp(64); }, "assignment.dscp");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->set_traffic_class(7); }, "assignment.traffic_class");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->set_level(1000); }, "assignment.level");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->mutable_flows(0)->set_udp_sport(70000); },
      "assignment.flows[0].udp_sport");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->mutable_flows(0)->set_src_nic(""); }, "assignment.flows[0].src_nic");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->mutable_flows(0)->set_path(1, "t o r"); },
      "assignment.flows[0].path[1]");
  ExpectInvalid(
      g, [&](auto& m) { a(m)->set_state(static_cast<v1::JobState>(77)); }, "assignment.state");
  ExpectInvalid(
      g, [&](auto& m) { (*a(m)->mutable_nccl_env())["bad name"] = "1"; }, "assignment.nccl_env");
}

TEST(ValidateTest, SwitchMessagesBadValues) {
  v1::Envelope hello = NewEnvelope(1);
  hello.mutable_switch_hello()->set_switch_name("tor0");
  hello.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  hello.mutable_switch_hello()->mutable_capabilities()->add_backends("sonic");
  ExpectInvalid(
      hello, [](auto& m) { m.mutable_switch_hello()->set_switch_name(""); },
      "switch_hello.switch_name");
  ExpectInvalid(
      hello, [](auto& m) { m.mutable_switch_hello()->mutable_capabilities()->set_queues(0); },
      "switch_hello.capabilities.queues");
  ExpectInvalid(
      hello, [](auto& m) { m.mutable_switch_hello()->mutable_capabilities()->set_queues(1000); },
      "switch_hello.capabilities.queues");

  const v1::Envelope g = GoodSwitchState();
  auto s = [](v1::Envelope& m) { return m.mutable_switch_state(); };
  ExpectInvalid(
      g, [&](auto& m) { (*s(m)->mutable_dscp_to_tc())[64] = 1; }, "switch_state.dscp_to_tc key");
  ExpectInvalid(
      g, [&](auto& m) { (*s(m)->mutable_dscp_to_tc())[10] = 8; }, "switch_state.dscp_to_tc[10]");
  ExpectInvalid(
      g, [&](auto& m) { (*s(m)->mutable_tc_to_queue())[9] = 1; }, "switch_state.tc_to_queue key");
  ExpectInvalid(
      g, [&](auto& m) { s(m)->mutable_schedulers(1)->set_weight(0); },
      "switch_state.schedulers[1].weight");
  ExpectInvalid(
      g, [&](auto& m) { s(m)->mutable_schedulers(1)->set_type("WFQ"); },
      "switch_state.schedulers[1].type");
  ExpectInvalid(
      g, [&](auto& m) { s(m)->mutable_schedulers(1)->set_queue(3); },
      "switch_state.schedulers[1].queue");
  ExpectInvalid(
      g, [&](auto& m) { s(m)->add_pfc_enable(8); }, "switch_state.pfc_enable[1]");
  ExpectInvalid(
      g, [&](auto& m) { s(m)->set_ports(0, ""); }, "switch_state.ports[0]");

  v1::Envelope applied = NewEnvelope(1);
  applied.mutable_switch_applied()->set_switch_name("tor0");
  *applied.mutable_switch_applied()->mutable_state() = g.switch_state();
  ExpectInvalid(
      applied,
      [](auto& m) { (*m.mutable_switch_applied()->mutable_state()->mutable_dscp_to_tc())[1] = 9; },
      "switch_applied.state.dscp_to_tc[1]");

  // Enforcement verification (issue #29): the check in hellos and applies, job_tcs in pushes.
  v1::EnforcementCheck check;
  check.set_status(v1::ENFORCEMENT_STATUS_MISMATCH);
  check.set_detail("Ethernet0 DSCP_TO_TC: dscp 10 -> tc 0, the plan says tc 5");
  *hello.mutable_switch_hello()->mutable_enforcement() = check;
  *applied.mutable_switch_applied()->mutable_enforcement() = check;
  EXPECT_TRUE(Validate(hello).ok());
  EXPECT_TRUE(Validate(applied).ok());
  ExpectInvalid(
      hello,
      [](auto& m) {
        m.mutable_switch_hello()->mutable_enforcement()->set_status(
            static_cast<v1::EnforcementStatus>(7));
      },
      "switch_hello.enforcement.status");
  ExpectInvalid(
      applied,
      [](auto& m) { m.mutable_switch_applied()->mutable_enforcement()->set_detail("a\x1b[2Jb"); },
      "switch_applied.enforcement.detail");
  ExpectInvalid(
      hello,
      [](auto& m) {
        m.mutable_switch_hello()->mutable_enforcement()->set_detail(std::string(5000, 'x'));
      },
      "switch_hello.enforcement.detail");
  v1::Envelope with_tcs = g;
  for (uint32_t tc : {2, 3, 4, 5}) with_tcs.mutable_switch_state()->add_job_tcs(tc);
  EXPECT_TRUE(Validate(with_tcs).ok());
  ExpectInvalid(
      with_tcs, [&](auto& m) { s(m)->add_job_tcs(8); }, "switch_state.job_tcs[4]");
}

TEST(ValidateTest, HostTelemetryBadValues) {
  v1::Envelope g = NewEnvelope(1);
  v1::HostTelemetry* t = g.mutable_host_telemetry();
  t->set_host("host0");
  t->set_seq(1);
  for (const char* nic : {"host0/nic0", "host0/nic1"}) {
    v1::NicCounters* n = t->add_nics();
    n->set_nic(nic);
    n->set_device("mlx5_0");
    n->set_port(1);
    n->set_interval_ns(1000000000);
    n->set_packet_seq_err(std::numeric_limits<uint64_t>::max());  // Any count is fine.
  }
  EXPECT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  auto h = [](v1::Envelope& m) { return m.mutable_host_telemetry(); };
  ExpectInvalid(
      g, [&](auto& m) { h(m)->set_host(""); }, "host_telemetry.host");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->set_host("host 0"); }, "host_telemetry.host");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(1)->set_nic(""); }, "host_telemetry.nics[1].nic");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(1)->set_nic("host0/nic0"); },
      "host_telemetry.nics[1].nic");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(0)->set_device("mlx5 0"); },
      "host_telemetry.nics[0].device");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(0)->set_port(256); }, "host_telemetry.nics[0].port");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(0)->set_interval_ns(0); },
      "host_telemetry.nics[0].interval_ns");
  ExpectInvalid(
      g, [&](auto& m) { h(m)->mutable_nics(1)->set_interval_ns(kMaxIterationNs + 1); },
      "host_telemetry.nics[1].interval_ns");
  ExpectInvalid(
      g,
      [&](auto& m) {
        for (int i = 0; i < 63; ++i) h(m)->add_nics()->CopyFrom(m.host_telemetry().nics(0));
      },
      "host_telemetry.nics");
}

// A host agent's capacity probe results (HostTelemetry.probes, issue #27): integers only on the
// wire (no NaN or negative value can be sent), so what is refused is what cannot be a train's
// measurement: port 0, more received than sent, huge byte counts or times, bytes without a
// transfer time, a lost train with bytes, no bytes without loss, too many results.
TEST(ValidateTest, HostTelemetryProbeResultsBadValues) {
  v1::Envelope g = NewEnvelope(1);
  v1::HostTelemetry* t = g.mutable_host_telemetry();
  t->set_host("host0");
  t->set_seq(1);
  v1::HostProbeResult* p = t->add_probes();
  p->set_job_id("job-a");
  p->set_src_nic("host0/nic0");
  p->set_dst_nic("host4/nic0");
  p->set_udp_sport(49152);
  p->set_sent(32);
  p->set_received(32);
  p->set_bytes(31 * 1472);
  p->set_transfer_time_ns(400000);
  p->set_send_time_ns(50000);
  v1::HostProbeResult* lost = t->add_probes();
  lost->CopyFrom(*p);
  lost->set_lost(true);
  lost->set_received(0);
  lost->set_bytes(0);
  lost->set_transfer_time_ns(0);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g).ToString();
  auto pr = [](v1::Envelope& m, int i) { return m.mutable_host_telemetry()->mutable_probes(i); };
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_job_id(""); }, "host_telemetry.probes[0].job_id");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 1)->set_src_nic("host0 nic0"); }, "host_telemetry.probes[1].src_nic");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_dst_nic("host0/nic0"); }, "host_telemetry.probes[0].dst_nic");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_udp_sport(0); }, "host_telemetry.probes[0].udp_sport");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_udp_sport(65536); }, "host_telemetry.probes[0].udp_sport");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_received(33); }, "host_telemetry.probes[0].received");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_sent(kMaxProbeTrainDatagrams + 1); },
      "host_telemetry.probes[0].sent");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_bytes(std::numeric_limits<uint64_t>::max()); },
      "host_telemetry.probes[0].bytes");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_transfer_time_ns(kMaxProbeTrainNs + 1); },
      "host_telemetry.probes[0].transfer_time_ns");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_send_time_ns(std::numeric_limits<uint64_t>::max()); },
      "host_telemetry.probes[0].send_time_ns");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_transfer_time_ns(0); },
      "host_telemetry.probes[0].transfer_time_ns");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 1)->set_bytes(1472); }, "host_telemetry.probes[1].lost");
  ExpectInvalid(
      g, [&](auto& m) { pr(m, 0)->set_bytes(0); }, "host_telemetry.probes[0].bytes");
  ExpectInvalid(
      g,
      [&](auto& m) {
        for (size_t i = 0; i < kMaxHostProbes; ++i) {
          m.mutable_host_telemetry()->add_probes()->CopyFrom(m.host_telemetry().probes(0));
        }
      },
      "host_telemetry.probes");
}

TEST(ValidateTest, AdminRequestsBadValues) {
  v1::Envelope job = NewEnvelope(1);
  job.mutable_job_request()->set_job_id("job-a");
  ExpectInvalid(
      job, [](auto& m) { m.mutable_job_request()->set_job_id(""); }, "job_request.job_id");

  v1::Envelope set = NewEnvelope(1);
  set.mutable_set_link_request()->set_link("tor0->agg1");
  set.mutable_set_link_request()->set_health(v1::LINK_HEALTH_DEGRADED);
  set.mutable_set_link_request()->set_capacity_bps(1e11);
  auto l = [](v1::Envelope& m) { return m.mutable_set_link_request(); };
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_link(""); }, "set_link_request.link");
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_link("tor0 agg1"); }, "set_link_request.link");
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_health(v1::LINK_HEALTH_UNSPECIFIED); },
      "set_link_request.health");
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_capacity_bps(kNaN); }, "set_link_request.capacity_bps");
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_capacity_bps(-5); }, "set_link_request.capacity_bps");
  ExpectInvalid(
      set, [&](auto& m) { l(m)->set_capacity_bps(0); }, "set_link_request.capacity_bps");

  v1::Envelope jobs = NewEnvelope(1);
  auto* s = jobs.mutable_list_jobs_reply()->add_jobs();
  s->set_job_id("job-a");
  s->set_intensity(1e12);
  ExpectInvalid(
      jobs, [](auto& m) { m.mutable_list_jobs_reply()->mutable_jobs(0)->set_priority(kNaN); },
      "list_jobs_reply.jobs[0].priority");
}

}  // namespace
}  // namespace crux::protocol
