// Validation of the host-part fields crux-hostd adds (client.proto HostPart, CommTraffic).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "crux/protocol/validate.h"

namespace crux::protocol {
namespace {

v1::Envelope Registration() {
  v1::Envelope e;
  e.set_protocol_version(1);
  e.set_request_id(1);
  auto* r = e.mutable_register_job();
  r->set_job_id("job-a");
  auto* h = r->add_placement();
  h->set_host("host1");
  h->set_gpus(2);
  r->mutable_host_part()->set_host("host1");
  r->mutable_host_part()->set_hosts_expected(2);
  r->mutable_host_part()->set_local_ranks(2);
  return e;
}

v1::Envelope Report() {
  v1::Envelope e;
  e.set_protocol_version(1);
  e.set_request_id(2);
  auto* p = e.mutable_profile_report();
  p->set_job_id("job-a");
  p->set_compute_time_ns(80'000'000);
  p->set_iteration_period_ns(100'000'000);
  p->set_samples(5);
  p->set_bytes_per_iteration(300'000'000);
  p->mutable_host_part()->set_host("host1");
  auto* c = p->add_comms();
  c->set_comm_hash(0xC0);
  c->set_nranks(4);
  c->set_nnodes(2);
  c->add_local_ranks(0);
  c->add_local_ranks(1);
  auto* b = c->add_bytes();
  b->set_rank(1);
  b->set_peer_rank(2);
  b->set_bytes(150'000'000);
  b = c->add_bytes();
  b->set_rank(0);
  b->set_peer_rank(-1);
  b->set_bytes(0);
  return e;
}

std::string Error(const v1::Envelope& e) { return Validate(e).message(); }

TEST(HostPartValidateTest, HostdMessagesPass) {
  EXPECT_TRUE(Validate(Registration()).ok()) << Error(Registration());
  EXPECT_TRUE(Validate(Report()).ok()) << Error(Report());
  v1::Envelope hb;
  hb.set_protocol_version(1);
  hb.set_request_id(3);
  hb.mutable_heartbeat()->set_job_id("job-a");
  hb.mutable_heartbeat()->mutable_host_part()->set_host("host1");
  EXPECT_TRUE(Validate(hb).ok()) << Error(hb);
}

TEST(HostPartValidateTest, BadHostPartsAreRefusedByField) {
  v1::Envelope e = Registration();
  e.mutable_register_job()->mutable_host_part()->set_host("host2");
  EXPECT_NE(Error(e).find("register_job.host_part.host: a host part's placement must be that one"),
            std::string::npos)
      << Error(e);
  e = Registration();
  e.mutable_register_job()->mutable_host_part()->set_host("bad host");
  EXPECT_NE(Error(e).find("register_job.host_part.host"), std::string::npos) << Error(e);
  e = Registration();
  e.mutable_register_job()->mutable_host_part()->set_local_ranks(5000);
  EXPECT_NE(Error(e).find("host_part.local_ranks"), std::string::npos) << Error(e);
  v1::Envelope end;
  end.set_protocol_version(1);
  end.set_request_id(4);
  end.mutable_end_job()->set_job_id("job-a");
  end.mutable_end_job()->mutable_host_part()->set_host("");
  EXPECT_NE(Error(end).find("end_job.host_part.host"), std::string::npos) << Error(end);
}

TEST(HostPartValidateTest, BadCommTrafficIsRefusedByField) {
  v1::Envelope e = Report();
  e.mutable_profile_report()->mutable_comms(0)->set_nranks(0);
  EXPECT_NE(Error(e).find("profile_report.comms[0].nranks"), std::string::npos) << Error(e);
  e = Report();
  e.mutable_profile_report()->mutable_comms(0)->set_local_ranks(1, 4);
  EXPECT_NE(Error(e).find("profile_report.comms[0].local_ranks[1]: must be < nranks"),
            std::string::npos)
      << Error(e);
  e = Report();
  e.mutable_profile_report()->mutable_comms(0)->mutable_bytes(0)->set_peer_rank(9);
  EXPECT_NE(Error(e).find("profile_report.comms[0].bytes[0].peer_rank"), std::string::npos)
      << Error(e);
  e = Report();
  e.mutable_profile_report()->mutable_comms(0)->mutable_bytes(1)->set_bytes(uint64_t{1} << 51);
  EXPECT_NE(Error(e).find("profile_report.comms[0].bytes[1].bytes"), std::string::npos) << Error(e);
}

TEST(HostPartValidateTest, LocalSlotsAreOptionalOnePerLocalRankAndBounded) {
  v1::Envelope e = Report();
  EXPECT_TRUE(Validate(e).ok());  // An older sender: no slots.
  e.mutable_profile_report()->mutable_comms(0)->add_local_slots(6);
  e.mutable_profile_report()->mutable_comms(0)->add_local_slots(7);
  EXPECT_TRUE(Validate(e).ok()) << Error(e);
  e.mutable_profile_report()->mutable_comms(0)->add_local_slots(0);
  EXPECT_NE(Error(e).find("profile_report.comms[0].local_slots: must be empty or as many as "
                          "local_ranks"),
            std::string::npos)
      << Error(e);
  e = Report();
  e.mutable_profile_report()->mutable_comms(0)->add_local_slots(0);
  e.mutable_profile_report()->mutable_comms(0)->add_local_slots(1024);
  EXPECT_NE(Error(e).find("profile_report.comms[0].local_slots[1]: must be < 1024"),
            std::string::npos)
      << Error(e);
}

TEST(HostPartValidateTest, NonFiniteFiguresOfAPartReportAreRefused) {
  v1::Envelope e = Report();
  e.mutable_profile_report()->set_overlap_start(std::nan(""));
  EXPECT_NE(Error(e).find("profile_report.overlap_start: must be finite"), std::string::npos)
      << Error(e);
  e = Report();
  e.mutable_profile_report()->set_flops_per_iteration(std::numeric_limits<double>::infinity());
  EXPECT_NE(Error(e).find("profile_report.flops_per_iteration: must be finite"), std::string::npos)
      << Error(e);
}

}  // namespace
}  // namespace crux::protocol
