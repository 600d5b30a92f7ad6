#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "rdma/enforcer.h"
#include "rdma/verbs.h"

#ifdef CRUX_WITH_IBVERBS
#include <infiniband/verbs.h>

#include "rdma/ibverbs.h"
#endif

namespace crux::client::rdma {
namespace {

// Records every call; QPs are fake handles (pointers to ints holding the QP number).
class FakeVerbs : public VerbsOps {
 public:
  struct TcCall {
    uint32_t qp;
    uint8_t tc;
    uint32_t flow_label;
  };
  core::Result<std::vector<std::string>> ListDevices() override {
    return std::vector<std::string>{"fake_mlx5_0"};
  }
  uint32_t QpNum(QpHandle qp) override { return *static_cast<uint32_t*>(qp); }
  core::Status SetTrafficClass(QpHandle qp, uint8_t tc, uint32_t fl) override {
    uint32_t n = QpNum(qp);
    if (fail_tc.count(n)) return core::FailedPreconditionError("ibv_modify_qp: Invalid argument");
    tc_calls.push_back({n, tc, fl});
    return core::Status::Ok();
  }
  core::Status SetUdpSport(QpHandle qp, uint16_t sport) override {
    if (!mlx5) return core::FailedPreconditionError("mlx5dv_modify_qp_udp_sport: not supported");
    sport_calls[QpNum(qp)] = sport;
    return core::Status::Ok();
  }
  bool mlx5 = true;
  std::map<uint32_t, int> fail_tc;
  std::vector<TcCall> tc_calls;
  std::map<uint32_t, uint16_t> sport_calls;
};

Assignment MakeAssignment() {
  Assignment a;
  a.epoch = 3;
  a.dscp = 26;
  a.traffic_class = 104;
  a.flows = {{"host0/nic0", "host1/nic0", 0xC123, {}}, {"host0/nic0", "host2/nic0", 0, {}}};
  return a;
}

TEST(RdmaTest, Mlx5dvPathSetsPortAndTrafficClass) {
  FakeVerbs fake;
  QpEnforcer enforcer(fake);
  uint32_t q1 = 0x11, q2 = 0x22;
  ASSERT_TRUE(enforcer.Bind({&q1, "host0/nic0", "host1/nic0"}).ok());
  ASSERT_TRUE(enforcer.Bind({&q2, "host0/nic0", "host2/nic0"}).ok());
  EXPECT_EQ(enforcer.Bind({nullptr, "a", "b"}).code(), core::StatusCode::kInvalidArgument);
  ASSERT_TRUE(enforcer.Apply(MakeAssignment()).ok());
  EXPECT_EQ(fake.sport_calls.size(), 1u);  // The unpinned flow keeps its port.
  EXPECT_EQ(fake.sport_calls.at(0x11), 0xC123);
  ASSERT_EQ(fake.tc_calls.size(), 2u);
  EXPECT_EQ(fake.tc_calls[0].tc, 104);
  EXPECT_EQ(fake.tc_calls[0].flow_label, 0u);  // Port set by mlx5dv, no flow label needed.
  auto results = enforcer.last_results();
  EXPECT_EQ(results[0].method, QpResult::SportMethod::kMlx5dv);
  EXPECT_EQ(results[1].method, QpResult::SportMethod::kNone);
}

TEST(RdmaTest, FallsBackToFlowLabelWithoutMlx5dv) {
  FakeVerbs fake;
  fake.mlx5 = false;
  QpEnforcer enforcer(fake, /*ecn_bits=*/2);
  uint32_t q1 = 0x11;
  ASSERT_TRUE(enforcer.Bind({&q1, "host0/nic0", "host1/nic0"}).ok());
  ASSERT_TRUE(enforcer.Apply(MakeAssignment()).ok());
  ASSERT_EQ(fake.tc_calls.size(), 1u);
  EXPECT_EQ(fake.tc_calls[0].tc, 106);
  EXPECT_EQ(FlowLabelToUdpSport(fake.tc_calls[0].flow_label), 0xC123);
  EXPECT_EQ(enforcer.last_results()[0].method, QpResult::SportMethod::kFlowLabel);
}

TEST(RdmaTest, OneFailingQpDoesNotStopTheOthers) {
  FakeVerbs fake;
  fake.fail_tc[0x11] = 1;
  QpEnforcer enforcer(fake);
  uint32_t q1 = 0x11, q2 = 0x22;
  ASSERT_TRUE(enforcer.Bind({&q1, "host0/nic0", "host1/nic0"}).ok());
  ASSERT_TRUE(enforcer.Bind({&q2, "host0/nic0", "host2/nic0"}).ok());
  core::Status s = enforcer.Apply(MakeAssignment());
  EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("1 of 2 QPs failed"), std::string::npos) << s.message();
  ASSERT_EQ(fake.tc_calls.size(), 1u);
  EXPECT_EQ(fake.tc_calls[0].qp, 0x22u);
  enforcer.Unbind(&q1);
  EXPECT_TRUE(enforcer.Apply(MakeAssignment()).ok());
}

TEST(RdmaTest, FlowLabelForEveryRocePort) {
  for (uint32_t port = kRoceSportMin; port <= 0xFFFF; ++port) {
    auto fl = FlowLabelForUdpSport(static_cast<uint16_t>(port));
    ASSERT_TRUE(fl.ok());
    ASSERT_NE(*fl, 0u);
    ASSERT_LT(*fl, 1u << 20);
    ASSERT_EQ(FlowLabelToUdpSport(*fl), port);
#ifdef CRUX_WITH_IBVERBS
    ASSERT_EQ(ibv_flow_label_to_udp_sport(*fl), port);  // The library's own fold agrees.
#endif
  }
  EXPECT_EQ(FlowLabelForUdpSport(4791).status().code(), core::StatusCode::kInvalidArgument);
}

#ifdef CRUX_WITH_IBVERBS
TEST(RdmaTest, RealLibibverbsReportsNoDeviceCleanly) {
  auto ops = MakeIbverbsOps();
  auto devices = ops->ListDevices();
  if (devices.ok() && !devices->empty()) {
    GTEST_SKIP() << "this machine has RDMA devices; the no-device path is not reachable";
  }
  auto probe = ProbeRdmaDevices(*ops);
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), core::StatusCode::kUnavailable);
  const std::string& m = probe.status().message();
  EXPECT_TRUE(m.find("no RDMA device") != std::string::npos ||
              m.find("ibv_get_device_list") != std::string::npos)
      << m;
  // Null QPs are refused by every call, never dereferenced.
  EXPECT_EQ(ops->SetTrafficClass(nullptr, 104, 0).code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops->SetUdpSport(nullptr, 0xC000).code(), core::StatusCode::kInvalidArgument);
}

TEST(RdmaTest, FillRtrAttributes) {
  ibv_qp_attr attr{};
  ASSERT_TRUE(FillRtrAttributes(MakeAssignment(), "host0/nic0", "host1/nic0", &attr, 2).ok());
  EXPECT_EQ(attr.ah_attr.is_global, 1);
  EXPECT_EQ(attr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(ibv_flow_label_to_udp_sport(attr.ah_attr.grh.flow_label), 0xC123);
  ibv_qp_attr unpinned{};
  ASSERT_TRUE(FillRtrAttributes(MakeAssignment(), "host0/nic0", "host2/nic0", &unpinned).ok());
  EXPECT_EQ(unpinned.ah_attr.grh.flow_label, 0u);
  EXPECT_EQ(unpinned.ah_attr.grh.traffic_class, 104);
  EXPECT_EQ(FillRtrAttributes(MakeAssignment(), "a", "b", nullptr).code(),
            core::StatusCode::kInvalidArgument);
}
#endif

}  // namespace
}  // namespace crux::client::rdma
