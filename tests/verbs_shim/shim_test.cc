// libcrux-verbs-shim.so loaded the way NCCL loads NCCL_IBVERBS_LIB (dlopen + dlvsym at
// "IBVERBS_1.1" etc.), over a fake "real" libibverbs and libmlx5 built for the tests
// (fake_ibverbs.cc, fake_mlx5.cc), with a stand-in crux-hostd (HostSink) sending PinTables.
// The shim is a process-wide singleton, so the tests share one instance: each test sets the
// table it needs and uses its own remote GIDs.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <string>

#include "../nccl_profiler/host_sink.h"
#include "crux/verbs_shim/pin_policy.h"
#include "fake_ibverbs.h"
#include "rdma/verbs.h"  // client_lib/src: FlowLabelToUdpSport.

#undef ibv_get_device_list
#undef ibv_query_port

namespace crux::verbs_shim {
namespace {

using testing_hostd::HostSink;

// --- PinPolicy (pure) ------------------------------------------------------------------------

hostd::Gid G(const char* text) { return *hostd::ParseGid(text); }

TEST(PinPolicyTest, NoTableChangesNothing) {
  PinPolicy p;
  EXPECT_EQ(p.PlanRtr("mlx5_0", G("10.0.0.2"), 106), RtrPlan{});
  EXPECT_EQ(p.SportFor("mlx5_0", G("10.0.0.2")), 0);
}

TEST(PinPolicyTest, PinsByDeviceAndGidAndKeepsNcclEcnBits) {
  PinPolicy p;
  hostd::PinTable t;
  t.job_id = "j";
  t.traffic_class = 104;  // DSCP 26.
  t.pins = {{"mlx5_0", "10.0.0.2", 0xC123}, {"mlx5_1", "::ffff:10.0.0.3", 0xFFFF}};
  ASSERT_TRUE(p.SetTable(t).ok());
  RtrPlan plan = p.PlanRtr("mlx5_0", G("::ffff:10.0.0.2"), 106);  // NCCL_IB_TC=106: ECN 2.
  EXPECT_TRUE(plan.pinned);
  EXPECT_EQ(plan.sport, 0xC123);
  EXPECT_EQ(client::rdma::FlowLabelToUdpSport(plan.flow_label), 0xC123);
  EXPECT_EQ(plan.traffic_class, 106);
  // Another device or peer: the job's class, NCCL's port.
  plan = p.PlanRtr("mlx5_1", G("10.0.0.2"), 0);
  EXPECT_FALSE(plan.pinned);
  EXPECT_EQ(plan.traffic_class, 104);
  EXPECT_EQ(p.SportFor("mlx5_1", G("10.0.0.3")), 0xFFFF);
}

TEST(PinPolicyTest, RefusesBadTablesAndKeepsTheOldOne) {
  PinPolicy p;
  hostd::PinTable good;
  good.pins = {{"mlx5_0", "10.0.0.2", 0xC000}};
  ASSERT_TRUE(p.SetTable(good).ok());
  hostd::PinTable bad = good;
  bad.pins.push_back({"mlx5_0", "not-a-gid", 0xC001});
  core::Status s = p.SetTable(bad);
  EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pins[1].remote_gid"), std::string::npos) << s.message();
  bad.pins = {{"mlx5_0", "10.0.0.2", 4791}};
  EXPECT_NE(p.SetTable(bad).message().find("pins[0].sport"), std::string::npos);
  bad.pins.clear();
  bad.traffic_class = 300;
  EXPECT_FALSE(p.SetTable(bad).ok());
  EXPECT_EQ(p.SportFor("mlx5_0", G("10.0.0.2")), 0xC000);
}

// --- The shim under NCCL's loader ---------------------------------------------------------------

struct Verbs {
  void* lib = nullptr;
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*query_port_speed)(ibv_context*, uint8_t, uint64_t*) = nullptr;
};

template <typename F>
void Sym(void* lib, F* f, const char* name, const char* version = "IBVERBS_1.1") {
  *f = reinterpret_cast<F>(dlvsym(lib, name, version));
}

class ShimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (v_ != nullptr) return;  // One shim per process (--gtest_repeat runs this again).
    char tmpl[] = "/tmp/crux_verbs_shim_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    const std::string socket = *dir_ + "/hostd.sock";
    setenv("CRUX_HOSTD_SOCKET", socket.c_str(), 1);
    setenv("CRUX_IBVERBS_REAL_LIB", CRUX_FAKE_IBVERBS, 1);
    setenv("CRUX_MLX5_REAL_LIB", CRUX_FAKE_MLX5, 1);
    setenv("CRUX_JOB_ID", "shim-job", 1);
    sink_ = new HostSink(socket);
    v_ = new Verbs();
    v_->lib = dlopen(CRUX_VERBS_SHIM, RTLD_NOW | RTLD_LOCAL);
    if (v_->lib == nullptr) return;
    Sym(v_->lib, &v_->get_device_list, "ibv_get_device_list");
    Sym(v_->lib, &v_->free_device_list, "ibv_free_device_list");
    Sym(v_->lib, &v_->open_device, "ibv_open_device");
    Sym(v_->lib, &v_->alloc_pd, "ibv_alloc_pd");
    Sym(v_->lib, &v_->create_qp, "ibv_create_qp");
    Sym(v_->lib, &v_->modify_qp, "ibv_modify_qp");
    Sym(v_->lib, &v_->destroy_qp, "ibv_destroy_qp");
    Sym(v_->lib, &v_->query_port_speed, "ibv_query_port_speed", "IBVERBS_1.16");
    fake_ = dlopen(CRUX_FAKE_IBVERBS, RTLD_NOW | RTLD_LOCAL);
    mlx5_ = dlopen(CRUX_FAKE_MLX5, RTLD_NOW | RTLD_LOCAL);
  }

  void SetUp() override {
    ASSERT_TRUE(sink_->status().ok()) << sink_->status().ToString();
    sink_->Clear();
    ASSERT_NE(v_->lib, nullptr) << dlerror();
    ASSERT_NE(fake_, nullptr);
    ASSERT_NE(mlx5_, nullptr);
    int n = 0;
    ibv_device** list = v_->get_device_list(&n);
    ASSERT_EQ(n, 1);
    ASSERT_STREQ(list[0]->name, "mlx5_0");
    ctx_ = v_->open_device(list[0]);
    v_->free_device_list(list);
    ASSERT_NE(ctx_, nullptr);
    pd_ = v_->alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }

  template <typename F>
  F Fake(void* lib, const char* name) {
    return reinterpret_cast<F>(dlsym(lib, name));
  }

  ibv_qp* CreateRc() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    return v_->create_qp(pd_, &a);
  }

  // NCCL's ncclIbRtrQp attributes for RoCE: global route, flow label 0, traffic class
  // NCCL_IB_TC, sgid index, hop limit 255.
  int ToRtr(ibv_qp* qp, const char* remote_gid, uint8_t nccl_tc, ibv_qp_attr* out = nullptr) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = 0x777;
    a.rq_psn = 0;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.flow_label = 0;
    a.ah_attr.grh.traffic_class = nccl_tc;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.sgid_index = 3;
    hostd::Gid g = G(remote_gid);
    std::memcpy(a.ah_attr.grh.dgid.raw, g.data(), 16);
    const int rc =
        v_->modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (out != nullptr) *out = a;
    return rc;
  }
  int ToState(ibv_qp* qp, ibv_qp_state s) {
    ibv_qp_attr a{};
    a.qp_state = s;
    return v_->modify_qp(qp, &a, IBV_QP_STATE);
  }

  // The last ibv_modify_qp the fake real library saw for `qpn`.
  fake_ibv_modify LastModify(uint32_t qpn) {
    auto count = Fake<int (*)()>(fake_, "fake_ibv_modify_count");
    auto entry = Fake<int (*)(int, fake_ibv_modify*)>(fake_, "fake_ibv_modify_entry");
    fake_ibv_modify m{};
    for (int i = count() - 1; i >= 0; --i) {
      entry(i, &m);
      if (m.qpn == qpn) return m;
    }
    ADD_FAILURE() << "no modify for qp " << qpn;
    return m;
  }

  // Waits until the shim is connected, then sends `t` and waits for its ack.
  hostd::PinAck SendTable(const hostd::PinTable& t) {
    EXPECT_TRUE(
        sink_->WaitFor([&] { return sink_->Connected(getpid()); }, std::chrono::seconds(5)));
    sink_->SendTo(getpid(), hostd::Message(t));
    hostd::PinAck ack;
    EXPECT_TRUE(sink_->WaitFor(
        [&] {
          for (const auto& [pid, a] : sink_->All<hostd::PinAck>()) {
            if (a.epoch == t.epoch && a.state_id == t.state_id) {
              ack = a;
              return true;
            }
          }
          return false;
        },
        std::chrono::seconds(5)));
    return ack;
  }

  std::optional<hostd::QpInfo> QpInfoFor(uint32_t qpn) {
    std::optional<hostd::QpInfo> out;
    sink_->WaitFor(
        [&] {
          for (const auto& [pid, q] : sink_->All<hostd::QpInfo>()) {
            if (q.qpn == qpn) out = q;
          }
          return out.has_value();
        },
        std::chrono::seconds(5));
    return out;
  }

  static std::string* dir_;
  static HostSink* sink_;
  static Verbs* v_;
  static void* fake_;
  static void* mlx5_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
};
std::string* ShimTest::dir_ = nullptr;
HostSink* ShimTest::sink_ = nullptr;
Verbs* ShimTest::v_ = nullptr;
void* ShimTest::fake_ = nullptr;
void* ShimTest::mlx5_ = nullptr;

TEST_F(ShimTest, ExportsEverySymbolNcclBindsAtItsVersion) {
  // NCCL 2.30's src/misc/ibvsymbols.cc: required at IBVERBS_1.1, optional at later versions.
  for (const char* s :
       {"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name", "ibv_open_device",
        "ibv_close_device",    "ibv_get_async_event",  "ibv_ack_async_event", "ibv_query_device",
        "ibv_query_port",      "ibv_query_gid",        "ibv_query_qp",        "ibv_alloc_pd",
        "ibv_dealloc_pd",      "ibv_reg_mr",           "ibv_dereg_mr",        "ibv_create_cq",
        "ibv_destroy_cq",      "ibv_create_qp",        "ibv_modify_qp",       "ibv_destroy_qp",
        "ibv_fork_init",       "ibv_event_type_str"}) {
    EXPECT_NE(dlvsym(v_->lib, s, "IBVERBS_1.1"), nullptr) << s;
  }
  EXPECT_NE(dlvsym(v_->lib, "ibv_reg_mr_iova2", "IBVERBS_1.8"), nullptr);
  EXPECT_NE(dlvsym(v_->lib, "ibv_query_ece", "IBVERBS_1.10"), nullptr);
  EXPECT_NE(dlvsym(v_->lib, "ibv_set_ece", "IBVERBS_1.10"), nullptr);
  EXPECT_NE(dlvsym(v_->lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"), nullptr);
  ASSERT_NE(v_->query_port_speed, nullptr);
  // The fake (like rdma-core 44) has no ibv_query_port_speed: the shim says so.
  uint64_t speed = 0;
  EXPECT_EQ(v_->query_port_speed(ctx_, 1, &speed), EOPNOTSUPP);
  // Nothing of Crux leaks into NCCL's namespace.
  EXPECT_EQ(dlsym(v_->lib, "_ZN4crux4core6Status8ToStringEv"), nullptr);
}

TEST_F(ShimTest, NoAssignmentKeepsNcclsAttributes) {
  ibv_qp* qp = CreateRc();
  ASSERT_NE(qp, nullptr);
  hostd::PinTable none;  // No job, no class, no pins.
  none.epoch = 1;
  none.state_id = 0x100;
  ASSERT_TRUE(SendTable(none).ok);
  ASSERT_EQ(ToState(qp, IBV_QPS_INIT), 0);
  ASSERT_EQ(ToRtr(qp, "10.0.7.7", 106), 0);
  fake_ibv_modify m = LastModify(qp->qp_num);
  EXPECT_EQ(m.state, IBV_QPS_RTR);
  EXPECT_EQ(m.flow_label, 0u);
  EXPECT_EQ(m.traffic_class, 106);
  auto info = QpInfoFor(qp->qp_num);
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->pinned);
  EXPECT_EQ(info->sport, 0);
  EXPECT_EQ(v_->destroy_qp(qp), 0);
}

TEST_F(ShimTest, PinsSourcePortAndTrafficClassAtRtrAndRepinsThroughMlx5dv) {
  ibv_qp* pinned = CreateRc();
  ibv_qp* other = CreateRc();
  ASSERT_NE(pinned, nullptr);
  ASSERT_NE(other, nullptr);
  hostd::PinTable t;
  t.job_id = "shim-job";
  t.epoch = 3;
  t.state_id = 0x200;
  t.traffic_class = 104;  // DSCP 26.
  t.pins = {{"mlx5_0", "10.0.1.2", 0xC123}};
  ASSERT_TRUE(SendTable(t).ok);

  for (ibv_qp* qp : {pinned, other}) ASSERT_EQ(ToState(qp, IBV_QPS_INIT), 0);
  ibv_qp_attr nccls{};
  ASSERT_EQ(ToRtr(pinned, "::ffff:10.0.1.2", 106, &nccls), 0);
  ASSERT_EQ(ToRtr(other, "10.0.1.3", 106), 0);
  EXPECT_EQ(nccls.ah_attr.grh.flow_label, 0u);  // NCCL's own struct is left alone.

  fake_ibv_modify m = LastModify(pinned->qp_num);
  EXPECT_EQ(m.state, IBV_QPS_RTR);
  ASSERT_NE(m.flow_label, 0u);
  EXPECT_EQ(client::rdma::FlowLabelToUdpSport(m.flow_label), 0xC123);
  EXPECT_EQ(m.traffic_class, 106);  // DSCP 26 << 2 with NCCL's ECN bits (2).
  EXPECT_EQ(m.dest_qpn, 0x777u);
  fake_ibv_modify o = LastModify(other->qp_num);
  EXPECT_EQ(o.flow_label, 0u);  // Not pinned: the NIC's QPN hash picks the port.
  EXPECT_EQ(o.traffic_class, 106);

  auto info = QpInfoFor(pinned->qp_num);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->pinned);
  EXPECT_EQ(info->sport, 0xC123);
  EXPECT_EQ(info->device, "mlx5_0");
  EXPECT_EQ(info->remote_gid, "::ffff:10.0.1.2");
  EXPECT_EQ(info->dest_qpn, 0x777u);
  EXPECT_EQ(info->traffic_class, 106);

  // A later plan moves the flow: the live (RTS) QP is re-pinned through mlx5dv.
  ASSERT_EQ(ToState(pinned, IBV_QPS_RTS), 0);
  auto count = Fake<int (*)()>(mlx5_, "fake_mlx5_sport_count");
  auto entry = Fake<int (*)(int, fake_mlx5_sport*)>(mlx5_, "fake_mlx5_sport_entry");
  const int before = count();
  t.epoch = 4;
  t.pins = {{"mlx5_0", "10.0.1.2", 0xC456}};
  ASSERT_TRUE(SendTable(t).ok);
  ASSERT_TRUE(sink_->WaitFor(
      [&] {
        for (const auto& [pid, r] : sink_->All<hostd::RepinResult>()) {
          if (r.qpn == pinned->qp_num && r.sport == 0xC456) return true;
        }
        return false;
      },
      std::chrono::seconds(5)));
  ASSERT_EQ(count(), before + 1);
  fake_mlx5_sport call{};
  entry(before, &call);
  EXPECT_EQ(call.qpn, pinned->qp_num);
  EXPECT_EQ(call.sport, 0xC456);
  EXPECT_EQ(call.result, 0);
  for (const auto& [pid, r] : sink_->All<hostd::RepinResult>()) {
    if (r.qpn == pinned->qp_num && r.sport == 0xC456) {
      EXPECT_TRUE(r.ok) << r.error;
    }
  }

  // A NIC without the capability: the error is reported, the QP keeps its port.
  Fake<void (*)(int)>(mlx5_, "fake_mlx5_set_unsupported")(1);
  t.epoch = 5;
  t.pins = {{"mlx5_0", "10.0.1.2", 0xC789}};
  ASSERT_TRUE(SendTable(t).ok);
  std::optional<hostd::RepinResult> failed;
  ASSERT_TRUE(sink_->WaitFor(
      [&] {
        for (const auto& [pid, r] : sink_->All<hostd::RepinResult>()) {
          if (r.qpn == pinned->qp_num && r.sport == 0xC789) failed = r;
        }
        return failed.has_value();
      },
      std::chrono::seconds(5)));
  EXPECT_FALSE(failed->ok);
  EXPECT_NE(failed->error.find("mlx5dv_modify_qp_udp_sport: Operation not supported"),
            std::string::npos)
      << failed->error;
  Fake<void (*)(int)>(mlx5_, "fake_mlx5_set_unsupported")(0);

  // A QP still in RTR cannot be re-pinned: said so, nothing called.
  ibv_qp* rtr_only = CreateRc();
  ASSERT_EQ(ToState(rtr_only, IBV_QPS_INIT), 0);
  ASSERT_EQ(ToRtr(rtr_only, "10.0.1.2", 0), 0);
  EXPECT_EQ(client::rdma::FlowLabelToUdpSport(LastModify(rtr_only->qp_num).flow_label), 0xC789);
  const int calls = count();
  t.epoch = 6;
  t.pins = {{"mlx5_0", "10.0.1.2", 0xD000}};
  ASSERT_TRUE(SendTable(t).ok);
  ASSERT_TRUE(sink_->WaitFor(
      [&] {
        for (const auto& [pid, r] : sink_->All<hostd::RepinResult>()) {
          if (r.qpn == rtr_only->qp_num && r.sport == 0xD000) {
            return !r.ok && r.error.find("not in RTS") != std::string::npos;
          }
        }
        return false;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(count(), calls + 1);  // Only the live QP (pinned) was re-pinned.

  // Destroyed QPs are forgotten and reported gone.
  for (ibv_qp* qp : {pinned, other, rtr_only}) {
    const uint32_t qpn = qp->qp_num;
    ASSERT_EQ(v_->destroy_qp(qp), 0);
    EXPECT_TRUE(sink_->WaitFor(
        [&] {
          for (const auto& [pid, g] : sink_->All<hostd::QpGone>()) {
            if (g.qpn == qpn) return true;
          }
          return false;
        },
        std::chrono::seconds(5)));
  }
}

TEST_F(ShimTest, BadTableIsRefusedAndTheOldOneStays) {
  hostd::PinTable t;
  t.epoch = 9;
  t.state_id = 0x300;
  t.traffic_class = 40;
  t.pins = {{"mlx5_0", "10.0.2.2", 0xC001}};
  ASSERT_TRUE(SendTable(t).ok);
  hostd::PinTable bad = t;
  bad.epoch = 10;
  bad.pins.push_back({"mlx5_0", "bogus", 0xC002});
  hostd::PinAck ack = SendTable(bad);
  EXPECT_FALSE(ack.ok);
  EXPECT_NE(ack.error.find("pins[1].remote_gid"), std::string::npos) << ack.error;
  ibv_qp* qp = CreateRc();
  ASSERT_EQ(ToState(qp, IBV_QPS_INIT), 0);
  ASSERT_EQ(ToRtr(qp, "10.0.2.2", 0), 0);
  fake_ibv_modify m = LastModify(qp->qp_num);
  EXPECT_EQ(client::rdma::FlowLabelToUdpSport(m.flow_label), 0xC001);
  EXPECT_EQ(m.traffic_class, 40);
  EXPECT_EQ(v_->destroy_qp(qp), 0);
}

}  // namespace
}  // namespace crux::verbs_shim
