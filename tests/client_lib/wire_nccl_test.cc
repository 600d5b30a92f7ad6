#include <gtest/gtest.h>

#include <cstdlib>

#include "crux/client/nccl.h"
#include "crux/protocol/validate.h"
#include "wire.h"

namespace crux::client {
namespace {

ClientOptions Good() {
  ClientOptions o;
  o.endpoint = "tcp://127.0.0.1:7450";
  o.job_id = "job-a";
  o.placement = {{"host0", 8, {"host0/nic0"}}, {"host1", 8, {}}};
  return o;
}

TEST(WireTest, OptionsErrorsNameTheField) {
  EXPECT_TRUE(internal::ValidateOptions(Good()).ok());
  struct Case {
    void (*mutate)(ClientOptions&);
    const char* field;
  } cases[] = {
      {[](ClientOptions& o) { o.endpoint.clear(); }, "options.endpoint"},
      {[](ClientOptions& o) { o.job_id = "a b"; }, "options.job_id"},
      {[](ClientOptions& o) { o.placement.clear(); }, "options.placement"},
      {[](ClientOptions& o) { o.placement[1].gpus = 0; }, "options.placement[1].gpus"},
      {[](ClientOptions& o) { o.placement[1].host = "host0"; }, "options.placement[1].host"},
      {[](ClientOptions& o) { o.placement[0].nics = {"bad nic"}; }, "options.placement[0].nics[0]"},
      {[](ClientOptions& o) { o.pattern = "tree"; }, "options.pattern"},
      {[](ClientOptions& o) { o.flops_per_iteration = -1; }, "options.flops_per_iteration"},
      {[](ClientOptions& o) { o.lease_ms = 5; }, "options.lease_ms"},
      {[](ClientOptions& o) { o.client_secret_key = "x"; }, "options.server_public_key"},
      {[](ClientOptions& o) { o.profiler.window = 1; }, "options.profiler.window"},
  };
  for (const auto& c : cases) {
    ClientOptions o = Good();
    c.mutate(o);
    core::Status s = internal::ValidateOptions(o);
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.message().rfind(c.field, 0), 0u) << s.message();
  }
  // Client::Start refuses bad options without starting anything.
  ClientOptions o = Good();
  o.job_id = "";
  EXPECT_EQ(Client::Start(o).status().code(), core::StatusCode::kInvalidArgument);
}

TEST(WireTest, MessagesPassProtocolValidation) {
  auto reg = internal::MakeRegisterJob(Good());
  EXPECT_TRUE(protocol::ValidateRegisterJob(reg).ok());
  EXPECT_EQ(reg.placement_size(), 2);
  EXPECT_EQ(reg.placement(0).nics(0).name(), "host0/nic0");
  Profile p;
  p.iteration_period_ns = 100'000'000;
  p.compute_time_ns = 80'000'000;
  p.overlap_start = 0.5;
  p.samples = 10;
  p.converged = true;
  p.bytes_per_iteration = 1 << 20;
  p.peers = {{"host0/nic0", "host1/nic0", 1 << 20}};
  auto rep = internal::MakeProfileReport("job-a", p);
  EXPECT_TRUE(protocol::ValidateProfileReport(rep).ok());
  EXPECT_EQ(rep.peers(0).bytes(), 1u << 20);
  EXPECT_TRUE(rep.converged());
}

TEST(WireTest, AssignmentFromWire) {
  v1::Assignment a;
  a.set_job_id("job-a");
  a.set_epoch(7);
  a.set_level(2);
  a.set_dscp(26);
  a.set_traffic_class(104);
  a.set_state(v1::JOB_STATE_SCHEDULED);
  auto* f = a.add_flows();
  f->set_src_nic("host0/nic0");
  f->set_dst_nic("host1/nic0");
  f->set_udp_sport(49999);
  f->add_path("host0/nic0");
  (*a.mutable_nccl_env())["NCCL_IB_TC"] = "104";
  Assignment out = internal::FromWire(a, 123);
  EXPECT_EQ(out.epoch, 7u);
  EXPECT_EQ(out.level, 2u);
  EXPECT_EQ(out.traffic_class, 104u);
  EXPECT_EQ(out.state, "SCHEDULED");
  EXPECT_EQ(out.UdpSportFor("host0/nic0", "host1/nic0"), 49999);
  EXPECT_EQ(out.UdpSportFor("host1/nic0", "host0/nic0"), 0);
  EXPECT_EQ(out.nccl_env.at("NCCL_IB_TC"), "104");
  EXPECT_EQ(out.received_unix_ns, 123);
}

TEST(NcclTest, TrafficClassAndEnvironment) {
  Assignment a;
  a.dscp = 26;
  a.traffic_class = 104;
  EXPECT_EQ(NcclTrafficClass(a), 104);
  NcclOptions ecn;
  ecn.ecn_bits = 2;
  EXPECT_EQ(NcclTrafficClass(a, ecn), 106);
  auto env = NcclEnvironment(a);
  EXPECT_EQ(env.at("NCCL_IB_TC"), "104");
  EXPECT_EQ(env.count("NCCL_IB_FIFO_TC"), 0u);
  ecn.set_fifo_tc = true;
  env = NcclEnvironment(a, ecn);
  EXPECT_EQ(env.at("NCCL_IB_TC"), "106");
  EXPECT_EQ(env.at("NCCL_IB_FIFO_TC"), "106");
  // The daemon's nccl_env is passed through.
  a.nccl_env["NCCL_IB_TC"] = "104";
  a.nccl_env["NCCL_IB_SL"] = "3";
  env = NcclEnvironment(a);
  EXPECT_EQ(env.at("NCCL_IB_SL"), "3");
}

TEST(NcclTest, ApplyRespectsUserSettingsUnlessOverwrite) {
  Assignment a;
  a.dscp = 10;
  unsetenv("NCCL_IB_TC");
  ASSERT_TRUE(ApplyNcclEnvironment(a).ok());
  EXPECT_STREQ(std::getenv("NCCL_IB_TC"), "40");
  a.dscp = 12;
  ASSERT_TRUE(ApplyNcclEnvironment(a).ok());
  EXPECT_STREQ(std::getenv("NCCL_IB_TC"), "40");  // The existing value wins.
  ASSERT_TRUE(ApplyNcclEnvironment(a, {}, /*overwrite=*/true).ok());
  EXPECT_STREQ(std::getenv("NCCL_IB_TC"), "48");
  NcclOptions bad;
  bad.ecn_bits = 4;
  EXPECT_EQ(ApplyNcclEnvironment(a, bad).code(), core::StatusCode::kInvalidArgument);
  unsetenv("NCCL_IB_TC");
}

}  // namespace
}  // namespace crux::client
