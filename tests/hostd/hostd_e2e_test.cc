// End to end without a GPU or NIC: real cruxd, real crux-hostd processes, fake NCCL ranks
// (fake_nccl_host loading libnccl-profiler-crux.so) and the verbs shim (in this process, over the
// fake libibverbs). Goal of issue #17: a DDP-like sequence converges to the right period and
// per-peer bytes within 10 iterations on every rank's host, and reaches cruxd.
#ifdef CRUX_HOSTD_E2E

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../system/cruxd_harness.h"
#include "../verbs_shim/fake_ibverbs.h"
#include "crux/hostd/host_protocol.h"
#include "crux/hostd/hostd_server.h"
#include "http_get.h"

#undef ibv_get_device_list

namespace crux::system_test {
namespace {

using nlohmann::json;

class Hostd {
 public:
  // `extra`: more config lines (YAML, each ending in a newline).
  // `net`: the first two octets of every host's NIC address ("127.0.": loopback, reachable).
  Hostd(const fs::path& dir, const std::string& host, const std::string& endpoint,
        const std::string& extra = "", const std::string& net = "10.0.") {
    socket_ = (dir / (host + ".sock")).string();
    const fs::path config = dir / (host + ".yaml");
    // Every host's nic0 has the address <net><host number>.1, and every agent knows them all.
    const fs::path addresses = dir / "nic-addresses.yaml";
    WriteFile(addresses,
              net + "0.1: host0/nic0\n" + net + "1.1: host1/nic0\n" + net + "4.1: host4/nic0\n");
    WriteFile(config,
              "host: " + host + "\ndaemon: " + endpoint + "\ninsecure: true\nsocket: " + socket_ +
                  "\nnics:\n  - {name: " + host + "/nic0, device: mlx5_0, address: " +
                  AddressOf(host, net) + "}\nnic_addresses: " + addresses.string() +
                  "\nregister_delay_ms: 300\nend_delay_ms: 500\ncall_timeout_ms: 1000\n" + extra);
    ok_ = child_.Start({CRUX_HOSTD_BINARY, "--config", config.string()}, dir / (host + ".out"),
                       dir / (host + ".err"));
    ok_ = ok_ && WaitUntil([&] { return hostd::QueryStatus(socket_, 500).ok(); },
                           std::chrono::seconds(10));
  }
  static std::string AddressOf(const std::string& host, const std::string& net = "10.0.") {
    return net + host.substr(4) + ".1";  // "hostN".
  }
  bool ok() const { return ok_; }
  const std::string& socket() const { return socket_; }
  json Status() const {
    auto s = hostd::QueryStatus(socket_, 2000);
    if (!s.ok()) return json::object();
    return json::parse(*s, nullptr, false);
  }
  // The job's entry in the status, or null.
  json Job(const std::string& id) const {
    json s = Status();
    for (const auto& j : s.value("jobs", json::array())) {
      if (j["job_id"] == id) return j;
    }
    return nullptr;
  }
  std::string Log() const { return child_.Stderr(); }

 private:
  std::string socket_;
  ChildProcess child_;
  bool ok_ = false;
};

std::vector<std::string> RankArgs(const std::string& abi, int rank, int nranks, int nnodes,
                                  int iterations, int pace_ms, int linger_ms) {
  return {CRUX_FAKE_NCCL_HOST,
          "--plugin",
          CRUX_NCCL_PROFILER_PLUGIN,
          "--abi",
          abi,
          "--rank",
          std::to_string(rank),
          "--nranks",
          std::to_string(nranks),
          "--nnodes",
          std::to_string(nnodes),
          "--iterations",
          std::to_string(iterations),
          "--pace-ms",
          std::to_string(pace_ms),
          "--linger-ms",
          std::to_string(linger_ms),
          "--comm-hash",
          "0x5eed00000000e2e0"};
}

class HostdE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The ranks inherit this environment (and a test may have set these for the shim).
    for (const char* v : {"CRUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "CRUX_HOSTD_SOCKET",
                          "CRUX_IBVERBS_REAL_LIB"}) {
      unsetenv(v);
    }
    cruxd_.WriteConfig(cruxd_extra_);
    std::string why;
    ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  }
  void TearDown() override {
    if (HasFailure()) cruxd_.DumpLogs();
  }

  bool StartRank(ChildProcess& c, std::vector<std::string> argv, const std::string& socket,
                 std::vector<std::string> env) {
    env.push_back("CRUX_HOSTD_SOCKET=" + socket);
    const std::string tag = "rank" + std::to_string(++ranks_);
    return c.Start(argv, dir_.path() / (tag + ".out"), dir_.path() / (tag + ".err"), {}, env);
  }

  TempDir dir_{"crux_hostd_e2e"};
  CruxdHarness cruxd_{dir_.path()};
  int ranks_ = 0;
  std::string cruxd_extra_;  // More cruxd config (set before SetUp).
};

// The NIC counters of a fake sysfs tree reach cruxd: crux-hostd reads them every 100 ms, sends
// the deltas as HostTelemetry, and cruxd acknowledges them (validated, converted to the fault
// manager's NIC signal); --status shows the delta of a counter that moved.
TEST_F(HostdE2eTest, NicCountersFromSysfsReachCruxdAsHostTelemetry) {
  const fs::path sys = dir_.path() / "sys";
  const fs::path counters = sys / "class/infiniband/mlx5_0/ports/1/hw_counters";
  fs::create_directories(counters);
  for (const char* name : {"packet_seq_err", "out_of_sequence", "local_ack_timeout_err",
                           "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"}) {
    WriteFile(counters / name, "100\n");  // No roce_adp_retrans(_to): an older driver.
  }
  Hostd host(dir_.path(), "host1", cruxd_.endpoint(),
             "nic_counters_interval_ms: 100\nsysfs_root: " + sys.string() + "\n");
  ASSERT_TRUE(host.ok()) << host.Log();
  auto nic_counters = [&] { return host.Status().value("nic_counters", json::object()); };
  ASSERT_TRUE(
      WaitUntil([&] { return nic_counters().value("acked", 0) >= 1; }, std::chrono::seconds(20)))
      << nic_counters().dump() << "\n"
      << host.Log();
  WriteFile(counters / "packet_seq_err", "142\n");
  ASSERT_TRUE(WaitUntil(
      [&] {
        const json n = nic_counters();
        return n.value("refused", 0) == 0 && !n["nics"].empty() &&
               n["nics"][0].contains("deltas") &&
               n["nics"][0]["deltas"].value("packet_seq_err", 0) == 42;
      },
      std::chrono::seconds(20)))
      << nic_counters().dump() << "\n"
      << host.Log();
  const json n = nic_counters();
  EXPECT_EQ(n["nics"][0]["found"].size(), 6u);
  EXPECT_EQ(n["nics"][0]["missing"], json({"roce_adp_retrans", "roce_adp_retrans_to"}));
  EXPECT_EQ(n["last_error"], "");
}

// Two ranks of one job on host1: crux-hostd registers the job once for the host, cruxd gets the
// merged profile, the assignment goes back down, and the shim applies its traffic class at RTR.
TEST_F(HostdE2eTest, SingleHostJobReachesCruxdAndItsAssignmentReachesTheShim) {
  Hostd hostd(dir_.path(), "host1", cruxd_.endpoint());
  ASSERT_TRUE(hostd.ok()) << hostd.Log();
  ChildProcess r0, r1;
  const std::vector<std::string> env = {"CRUX_JOB_ID=e2e-ddp", "CRUX_NCCL_SAMPLE_EVERY_MS=0"};
  ASSERT_TRUE(StartRank(r0, RankArgs("v6", 0, 2, 1, 40, 20, 2500), hostd.socket(), env));
  ASSERT_TRUE(StartRank(r1, RankArgs("v5", 1, 2, 1, 40, 20, 2500), hostd.socket(), env));

  json summary;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const CommandResult r =
            cruxd_.Cruxctl({"--json", "job", "e2e-ddp"}, std::chrono::milliseconds(2000));
        if (r.exit_code != 0) return false;
        json d = json::parse(r.out, nullptr, false);
        if (d.is_discarded()) return false;
        summary = d;
        // The host's profile arrived and the plan that followed it went out.
        return d["summary"].value("samples", 0) > 0 && d["summary"].value("epoch", 0) >= 1;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(200)))
      << hostd.Log() << r0.Stderr() << hostd.Status().dump();
  // A one-host job has no network flows, so cruxd does not plan it (no planned period); it holds
  // the registration (2 GPUs on host1), the host's converged profile (within 10 iterations) and
  // an assignment.
  EXPECT_LE(summary["summary"]["samples"].get<int>(), 10) << summary.dump();
  EXPECT_EQ(summary["summary"]["gpus"], 2) << summary.dump();
  EXPECT_EQ(summary["hosts"], json::array({"host1"})) << summary.dump();

  json job;
  ASSERT_TRUE(WaitUntil(
      [&] {
        job = hostd.Job("e2e-ddp");
        return !job.is_null() && job.contains("assignment") && job.contains("profile");
      },
      std::chrono::seconds(10)))
      << hostd.Status().dump();
  EXPECT_TRUE(job["registered"].get<bool>());
  EXPECT_EQ(job["local_ranks"], 2);
  EXPECT_EQ(job["registrations"], 1);
  EXPECT_NEAR(job["profile"]["period_ns"].get<double>(), 100e6, 2e6);
  // Each rank: AllReduce 2 (2-1)/2 x 25 MB x 4 buckets = 100 MB per iteration.
  EXPECT_NEAR(job["profile"]["bytes_per_iteration"].get<double>(), 200e6, 2e6);
  for (const auto& r : job["ranks"]) {
    EXPECT_TRUE(r["profile"]["converged"].get<bool>());
    EXPECT_LE(r["profile"]["samples"].get<int>(), 10) << r.dump();  // Within 10 iterations.
  }
  const int dscp = job["assignment"]["dscp"].get<int>();
  EXPECT_EQ(dscp, summary["summary"]["dscp"].get<int>());

  // The verbs shim of a rank of the job (this process): it gets the job's table from hostd and
  // applies the traffic class at INIT -> RTR.
  setenv("CRUX_HOSTD_SOCKET", hostd.socket().c_str(), 1);
  setenv("CRUX_JOB_ID", "e2e-ddp", 1);
  setenv("CRUX_IBVERBS_REAL_LIB", CRUX_FAKE_IBVERBS, 1);
  void* shim = dlopen(CRUX_VERBS_SHIM, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(shim, nullptr) << dlerror();
  auto get_list =
      reinterpret_cast<ibv_device** (*)(int*)>(dlvsym(shim, "ibv_get_device_list", "IBVERBS_1.1"));
  auto open_dev = reinterpret_cast<ibv_context* (*)(ibv_device*)>(
      dlvsym(shim, "ibv_open_device", "IBVERBS_1.1"));
  auto alloc_pd =
      reinterpret_cast<ibv_pd* (*)(ibv_context*)>(dlvsym(shim, "ibv_alloc_pd", "IBVERBS_1.1"));
  auto create_qp = reinterpret_cast<ibv_qp* (*)(ibv_pd*, ibv_qp_init_attr*)>(
      dlvsym(shim, "ibv_create_qp", "IBVERBS_1.1"));
  auto modify_qp = reinterpret_cast<int (*)(ibv_qp*, ibv_qp_attr*, int)>(
      dlvsym(shim, "ibv_modify_qp", "IBVERBS_1.1"));
  int n = 0;
  ibv_device** devs = get_list(&n);
  ASSERT_EQ(n, 1);
  ibv_pd* pd = alloc_pd(open_dev(devs[0]));
  ASSERT_TRUE(WaitUntil(
      [&] {
        json j = hostd.Job("e2e-ddp");
        if (j.is_null()) return false;
        for (const auto& r : j["ranks"]) {
          if (r["pid"] == getpid() && r.contains("pins_ack")) return r["pins_ack"]["ok"] == true;
        }
        return false;
      },
      std::chrono::seconds(10)))
      << hostd.Status().dump();
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = create_qp(pd, &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.dest_qp_num = 0x42;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.traffic_class = 0;  // NCCL without NCCL_IB_TC.
  hostd::Gid g = *hostd::ParseGid("10.0.5.1");
  std::memcpy(a.ah_attr.grh.dgid.raw, g.data(), 16);
  ASSERT_EQ(modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN), 0);
  void* fake = dlopen(CRUX_FAKE_IBVERBS, RTLD_NOW | RTLD_LOCAL);
  auto count = reinterpret_cast<int (*)()>(dlsym(fake, "fake_ibv_modify_count"));
  auto entry =
      reinterpret_cast<int (*)(int, fake_ibv_modify*)>(dlsym(fake, "fake_ibv_modify_entry"));
  fake_ibv_modify m{};
  ASSERT_EQ(entry(count() - 1, &m), 0);
  EXPECT_EQ(m.qpn, qp->qp_num);
  EXPECT_EQ(m.traffic_class, dscp << 2);
  EXPECT_EQ(m.flow_label, 0u);  // A single-host job has no network flows to pin.
  // hostd sees the QP.
  EXPECT_TRUE(WaitUntil(
      [&] {
        json j = hostd.Job("e2e-ddp");
        return !j.is_null() && j.value("qps", 0) == 1;
      },
      std::chrono::seconds(5)))
      << hostd.Status().dump();
  EXPECT_EQ(r0.Wait(std::chrono::seconds(30)), 0) << r0.Stderr();
  EXPECT_EQ(r1.Wait(std::chrono::seconds(30)), 0) << r1.Stderr();
}

// A 4-rank job on two hosts under different ToRs (two ranks each, one crux-hostd per host,
// sampling windows on): both agents converge to the period and the real per-peer bytes (the
// ring's inter-node hops 1 -> 2 and 3 -> 0 carry the traffic); cruxd merges the two parts into
// one job whose flows carry exactly those bytes between the hosts' NICs (issue #17 item 4), and
// each agent gets its host's cut of the assignment and pins its flow.
TEST_F(HostdE2eTest, MultiHostJobIsMergedByCruxdAndPinnedOnEveryHost) {
  Hostd h0(dir_.path(), "host0", cruxd_.endpoint());
  Hostd h4(dir_.path(), "host4", cruxd_.endpoint());
  ASSERT_TRUE(h0.ok()) << h0.Log();
  ASSERT_TRUE(h4.ok()) << h4.Log();
  const std::vector<std::string> env = {"CRUX_JOB_ID=e2e-multi", "CRUX_NCCL_SAMPLE_EVERY_MS=100",
                                        "CRUX_NCCL_SAMPLE_MS=200"};
  ChildProcess ranks[4];
  for (int r = 0; r < 4; ++r) {
    // Each rank's local slot (GPU r % 2 of its host) as a launcher sets it; the agents report it
    // and cruxd checks it against the host's 8 GPUs (one configured NIC: all on nic0).
    std::vector<std::string> rank_env = env;
    rank_env.push_back("LOCAL_RANK=" + std::to_string(r % 2));
    ASSERT_TRUE(StartRank(ranks[r], RankArgs(r % 2 ? "v6" : "v4", r, 4, 2, 60, 15, 2500),
                          r < 2 ? h0.socket() : h4.socket(), rank_env));
  }
  auto converged = [](const json& job) {
    if (job.is_null() || job["ranks"].size() != 2) return false;
    // Every rank's bytes are measured: zero (intra-node) or split over peers (sampled).
    for (const auto& r : job["ranks"]) {
      if (!r.contains("profile")) return false;
      for (const auto& c : r["profile"]["comms"]) {
        if (c["bytes"] != 0 && c["peers"].empty()) return false;
      }
    }
    return true;
  };
  json j0, j4;
  ASSERT_TRUE(WaitUntil(
      [&] {
        j0 = h0.Job("e2e-multi");
        j4 = h4.Job("e2e-multi");
        return converged(j0) && converged(j4);
      },
      std::chrono::seconds(20), std::chrono::milliseconds(100)))
      << j0.dump() << "\n"
      << j4.dump();
  for (const json& job : {j0, j4}) {
    EXPECT_EQ(job["hosts_expected"], 2);
    for (const auto& r : job["ranks"]) {
      EXPECT_NEAR(r["profile"]["period_ns"].get<double>(), 100e6, 2e6) << r.dump();
      const int rank = r["comms"][0]["rank"];
      const auto& c = r["profile"]["comms"][0];
      if (rank == 1 || rank == 3) {  // Ring successor on the other host: all bytes on the wire.
        ASSERT_EQ(c["peers"].size(), 1u) << r.dump();
        EXPECT_EQ(c["peers"][0][0], (rank + 1) % 4);
        EXPECT_NEAR(c["peers"][0][1].get<double>(), 150e6, 3e6) << r.dump();
      } else {  // Successor on the same host: nothing reaches the NIC.
        EXPECT_EQ(c["bytes"], 0) << r.dump();
      }
    }
  }

  // cruxd: one job made of both parts; its flows are the merged per-peer bytes of every rank.
  auto flow_bytes = [](const json& detail, const std::string& src, const std::string& dst) {
    for (const auto& f : detail["flows"]) {
      if (f["src_nic"] == src && f["dst_nic"] == dst) return f["bytes"].get<double>();
    }
    return -1.0;
  };
  json detail;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const CommandResult r =
            cruxd_.Cruxctl({"--json", "job", "e2e-multi"}, std::chrono::milliseconds(2000));
        if (r.exit_code != 0) return false;
        json d = json::parse(r.out, nullptr, false);
        if (d.is_discarded() || !d.contains("merge")) return false;
        detail = d;
        return d["merge"]["complete"] == true && d["flows"].size() == 2 &&
               std::abs(flow_bytes(d, "host0/nic0", "host4/nic0") - 150e6) < 3e6 &&
               std::abs(flow_bytes(d, "host4/nic0", "host0/nic0") - 150e6) < 3e6;
      },
      std::chrono::seconds(15), std::chrono::milliseconds(200)))
      << detail.dump() << "\n"
      << h0.Status().dump() << "\n"
      << h4.Status().dump();
  EXPECT_EQ(detail["hosts"], json::array({"host0", "host4"})) << detail.dump();
  EXPECT_EQ(detail["summary"]["gpus"], 4);
  EXPECT_EQ(detail["summary"]["state"], "scheduled") << detail.dump();
  ASSERT_EQ(detail["parts"].size(), 2u);
  for (const auto& p : detail["parts"]) {
    EXPECT_TRUE(p["connected"].get<bool>()) << p.dump();
    EXPECT_EQ(p["local_ranks"], 2);
    EXPECT_GT(p["last_report_ms"].get<double>(), 0);
  }
  EXPECT_NEAR(detail["merge"]["cross_host_bytes"].get<double>(), 300e6, 6e6);
  for (Hostd* h : {&h0, &h4}) {
    const json st = h->Status();
    std::set<int> slots;
    for (const auto& job : st["jobs"]) {
      for (const auto& rank : job["ranks"]) slots.insert(rank["local_slot"].get<int>());
    }
    EXPECT_EQ(slots, (std::set<int>{0, 1})) << st.dump();
  }
  EXPECT_EQ(detail["merge"]["conflicting_ranks"], 0);
  uint16_t sport[2] = {0, 0};  // host0 -> host4, host4 -> host0.
  for (const auto& f : detail["flows"]) {
    (f["src_nic"] == "host0/nic0" ? sport[0] : sport[1]) = f["udp_sport"].get<uint16_t>();
  }
  EXPECT_NE(sport[0], 0);
  EXPECT_NE(sport[1], 0);

  // Both agents registered their part once (no refusal), got the job's assignment cut to their
  // host (the flow that leaves its own NIC), and each pins that flow.
  const int epoch = detail["summary"]["epoch"].get<int>();
  auto pinned = [&](const Hostd& h, const std::string& remote, uint16_t port, json* job) {
    *job = h.Job("e2e-multi");
    if (job->is_null() || !job->contains("assignment")) return false;
    const json& pins = (*job)["pin_table"];
    return (*job)["assignment"]["epoch"].get<int>() >= epoch && pins.size() == 1 &&
           pins[0]["remote_gid"] == *hostd::CanonicalGid(Hostd::AddressOf(remote)) &&
           pins[0]["sport"] == port && pins[0]["device"] == "mlx5_0";
  };
  EXPECT_TRUE(
      WaitUntil([&] { return pinned(h0, "host4", sport[0], &j0); }, std::chrono::seconds(10)))
      << j0.dump();
  EXPECT_TRUE(
      WaitUntil([&] { return pinned(h4, "host0", sport[1], &j4); }, std::chrono::seconds(10)))
      << j4.dump();
  for (const json& job : {j0, j4}) {
    EXPECT_TRUE(job["registered"].get<bool>()) << job.dump();
    EXPECT_EQ(job["registrations"], 1) << job.dump();
    EXPECT_EQ(job["register_failures"], 0) << job.dump();
    EXPECT_EQ(job["assignment"]["flows"], 1) << "only the host's own flows";
  }

  for (auto& r : ranks) EXPECT_EQ(r.Wait(std::chrono::seconds(30)), 0) << r.Stderr();
  // Ranks gone + end_delay_ms: each agent ends its part; the job goes with the last one.
  EXPECT_TRUE(WaitUntil([&] { return cruxd_.CruxctlJson({"jobs"})["jobs"].empty(); },
                        std::chrono::seconds(15)))
      << cruxd_.CruxctlJson({"jobs"}).dump();
}

// Capacity probes with real processes (issue #27): cruxd with faults.probes designs probes into
// the assignment of a job spanning host0 and host4; each crux-hostd (NIC addresses on loopback,
// 127.0.<host>.1, so the trains really travel: through the host's stack, not a link) sends the
// probes leaving its NIC as 16-datagram trains to the other agent's responder and reports the
// measurements to cruxd, which acknowledges them and counts each by its outcome in /metrics
// (crux_host_probes_total). Loopback measures the host, so which outcome (accepted when the
// host's pace reaches the gray ratio of the path's nominal capacity, else sender_limited) is
// the machine's; none may be rejected.
class HostdProbesE2eTest : public HostdE2eTest {
 protected:
  HostdProbesE2eTest() {
    metrics_port_ = FreeTcpPort();
    cruxd_extra_ =
        "faults:\n  probes: true\nmetrics_listen: \"127.0.0.1:" + std::to_string(metrics_port_) +
        "\"\n";
  }
  int metrics_port_ = 0;
};

TEST_F(HostdProbesE2eTest, PlannedProbesAreSentAsTrainsAndTheirResultsReachCruxd) {
  ASSERT_GT(metrics_port_, 0);
  const int udp_port = FreeTcpPort();  // The responders' port on both loopback addresses.
  const std::string probes = "probes:\n  enabled: true\n  port: " + std::to_string(udp_port) +
                             "\n  interval_ms: 500\n  timeout_ms: 400\n  train_count: 16\n"
                             "  train_bytes: 1200\n";
  Hostd h0(dir_.path(), "host0", cruxd_.endpoint(), probes, "127.0.");
  Hostd h4(dir_.path(), "host4", cruxd_.endpoint(), probes, "127.0.");
  ASSERT_TRUE(h0.ok()) << h0.Log();
  ASSERT_TRUE(h4.ok()) << h4.Log();
  const std::vector<std::string> env = {"CRUX_JOB_ID=e2e-probes", "CRUX_NCCL_SAMPLE_EVERY_MS=100",
                                        "CRUX_NCCL_SAMPLE_MS=200"};
  ChildProcess ranks[4];
  for (int r = 0; r < 4; ++r) {
    std::vector<std::string> rank_env = env;
    rank_env.push_back("LOCAL_RANK=" + std::to_string(r % 2));
    ASSERT_TRUE(StartRank(ranks[r], RankArgs("v6", r, 4, 2, 60, 15, 10000),
                          r < 2 ? h0.socket() : h4.socket(), rank_env));
  }
  // host0's agent measures a train of its probe, reports it and cruxd acknowledges it.
  json reports, probe;
  std::string train;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const json st = h0.Status();
        reports = st.value("probe_reports", json::object());
        probe = st.value("probes", json::array()).empty() ? json() : st["probes"][0];
        train.clear();
        const json data = probe.is_object() ? probe.value("data", json::object()) : json::object();
        for (const auto& [key, text] : data.items()) {
          if (key.rfind("train host0/nic0 -> ", 0) == 0) {
            train = key + ": " + text.get<std::string>();
          }
        }
        return reports.value("acked", 0) >= 1 &&
               train.find("sent 16 received 16 bytes 18000") != std::string::npos;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100)))
      << reports.dump() << "\n"
      << probe.dump() << "\n"
      << h0.Log() << cruxd_.LastLog();
  EXPECT_EQ(reports["refused"], 0) << reports.dump();
  EXPECT_GE(reports["results_sent"].get<int>(), 1);
  std::cout << "loopback train (the host, not a link): " << train << "\n";
  // host4's own probes, if the plan gave it any (shown, not asserted: its rounds are its own).
  const json st4 = h4.Status();
  if (!st4.value("probes", json::array()).empty()) {
    const json data4 = st4["probes"][0].value("data", json::object());
    for (const auto& [key, text] : data4.items()) {
      if (key.rfind("train ", 0) == 0) std::cout << "host4: " << key << ": " << text << "\n";
    }
  }
  // cruxd counted them, none rejected.
  std::string text;
  auto count = [&](const std::string& outcome) {
    const std::string key = "crux_host_probes_total{outcome=\"" + outcome + "\"} ";
    const size_t at = text.find(key);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  EXPECT_TRUE(WaitUntil(
      [&] {
        text = ::crux::test::HttpGet(metrics_port_, "/metrics");
        return count("accepted") + count("sender_limited") + count("stale") >= 1;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(200)))
      << text;
  EXPECT_EQ(count("rejected"), 0) << text;
  std::cout << "cruxd host probes: accepted " << count("accepted") << ", sender_limited "
            << count("sender_limited") << ", stale " << count("stale") << "\n";
  for (auto& r : ranks) EXPECT_EQ(r.Wait(std::chrono::seconds(30)), 0) << r.Stderr();
}

}  // namespace
}  // namespace crux::system_test

#endif  // CRUX_HOSTD_E2E
