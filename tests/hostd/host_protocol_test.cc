// The host protocol's messages: every type survives Encode/Decode, bad input gets an error
// naming the field, and GIDs are canonical.
#include "crux/hostd/host_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace crux::hostd {
namespace {

TEST(HostProtocolTest, EveryMessageRoundTrips) {
  RankProfile p;
  p.job_id = "job-1";
  p.period_ns = 100'000'000;
  p.comm_ns = 25'000'000;
  p.compute_ns = 75'000'000;
  p.samples = 7;
  p.converged = true;
  p.comms = {{0xFFFFFFFFFFFFFFFFull, 150'000'000, {{2, 150'000'000}, {3, 1}}}, {0x1, 0, {}}};
  PinTable t;
  t.job_id = "job-1";
  t.epoch = 12;
  t.state_id = 0xDEADBEEFCAFEF00Dull;
  t.traffic_class = 104;
  t.pins = {{"mlx5_0", "::ffff:10.0.1.2", 0xC123}};
  const std::vector<Message> all = {
      Hello{Role::kVerbs, 4242, "job-1", "SLURM_JOB_ID", "IBVERBS_1.1"},
      Hello{Role::kProfiler, 4243, "job-1", "SLURM_JOB_ID", "v5", 7},
      CommInfo{0xABCDEF0123456789ull, 3, 8, 2, "dp", false},
      p,
      PluginStats{10, 1, 5, 2},
      QpInfo{"mlx5_0", 1, 0x100, 0x777, "::ffff:10.0.1.2", 0xC123, 106, true},
      QpGone{"mlx5_0", 0x100},
      RepinResult{"mlx5_0", 0x100, 0xC456, false, "mlx5dv_modify_qp_udp_sport: nope"},
      t,
      PinAck{12, 0xDEADBEEFCAFEF00Dull, true, ""},
      StatusRequest{},
      StatusReply{R"({"host":"host0"})"},
      Refused{"job-1", kRefusedResourceExhausted, "limits.jobs_per_uid: uid 1000 already has 8"},
  };
  for (const Message& m : all) {
    auto back = Decode(Encode(m));
    ASSERT_TRUE(back.ok()) << back.status().ToString() << " for " << Encode(m);
    EXPECT_EQ(*back, m) << Encode(m);
  }
}

TEST(HostProtocolTest, BadMessagesNameTheField) {
  auto err = [](const std::string& text) { return Decode(text).status().message(); };
  EXPECT_NE(err("not json").find("not a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"v":2,"type":"hello"})").find("v: must be 1"), std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"teleport"})").find("unknown type 'teleport'"), std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"hello","role":"nccl","pid":5})").find("hello.role"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"v":1,"type":"hello","role":"verbs","pid":5,"job_id":"a b"})").find("hello.job_id"),
      std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"hello","role":"profiler","pid":5,"local_slot":1024})")
                .find("hello.local_slot: must be in [-1, 1023]"),
            std::string::npos);
  // An older plugin sends no slot: not known.
  auto old = Decode(R"({"v":1,"type":"hello","role":"profiler","pid":5})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(std::get<Hello>(*old).local_slot, -1);
  EXPECT_NE(err(R"({"v":1,"type":"comm","comm":"0x1","rank":4,"nranks":4,"nnodes":1})")
                .find("comm.rank: must be < nranks"),
            std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"comm","comm":"12","rank":0,"nranks":4,"nnodes":1})")
                .find("comm.comm: must be a 0x-prefixed hex number"),
            std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"profile","job_id":"j","period_ns":0,"comm_ns":0,)"
                R"("compute_ns":0,"samples":1})")
                .find("profile.period_ns"),
            std::string::npos);
  EXPECT_NE(err(R"({"v":1,"type":"pins","epoch":1,"state_id":"0x1","traffic_class":-1,)"
                R"("pins":[["mlx5_0","10.0.0.1",4791]]})")
                .find("pins.pins"),
            std::string::npos);
  EXPECT_FALSE(Decode(std::string(kMaxMessageBytes + 1, ' ')).ok());
}

TEST(HostProtocolTest, GidsAreCanonical) {
  EXPECT_EQ(*CanonicalGid("10.0.1.2"), "::ffff:10.0.1.2");
  EXPECT_EQ(*CanonicalGid("::FFFF:10.0.1.2"), "::ffff:10.0.1.2");
  EXPECT_EQ(*CanonicalGid("fe80:0:0:0:0:0:0:1"), "fe80::1");
  EXPECT_FALSE(CanonicalGid("10.0.1").ok());
  EXPECT_TRUE(IsValidJobId("slurm-42/step.1:a_b"));
  EXPECT_FALSE(IsValidJobId(""));
  EXPECT_FALSE(IsValidJobId(std::string(129, 'a')));
}

}  // namespace
}  // namespace crux::hostd
