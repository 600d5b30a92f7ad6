// libnccl-profiler-crux.so driven through each exported ABI version by fake_nccl_host (a
// separate process, as NCCL is: it dlopens the plugin and calls the table it finds), with a
// stand-in crux-hostd (HostSink) collecting what the plugin reports.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../system/process_util.h"
#include "host_sink.h"

namespace crux::testing_hostd {
namespace {

namespace fs = std::filesystem;
using system_test::ChildProcess;
using system_test::TempDir;

constexpr const char* kPlugin = CRUX_NCCL_PROFILER_PLUGIN;
constexpr const char* kFakeHost = CRUX_FAKE_NCCL_HOST;

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The job id rule reads these; the test decides them per child.
    for (const char* v : {"CRUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) unsetenv(v);
    socket_ = (dir_.path() / "hostd.sock").string();
  }

  // Starts one fake NCCL rank; returns false when it could not start.
  bool StartRank(ChildProcess& child, const std::string& abi, std::vector<std::string> args,
                 std::vector<std::string> env) {
    std::vector<std::string> argv = {kFakeHost, "--plugin", kPlugin, "--abi", abi};
    argv.insert(argv.end(), args.begin(), args.end());
    env.push_back("CRUX_HOSTD_SOCKET=" + socket_);
    const std::string tag = abi + "_" + std::to_string(++children_);
    return child.Start(argv, dir_.path() / (tag + ".out"), dir_.path() / (tag + ".err"), {}, env);
  }

  TempDir dir_{"crux_nccl_plugin"};
  std::string socket_;
  int children_ = 0;
};

TEST_F(PluginTest, ExportsTheV4V5V6TablesAndNothingElse) {
  void* lib = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  for (const char* sym : {"ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"}) {
    auto* table = static_cast<const char* const*>(dlsym(lib, sym));
    ASSERT_NE(table, nullptr) << sym;
    EXPECT_STREQ(table[0], "crux") << sym;  // `name` is the first member of every version.
  }
  // Versions without comm hash / rank count are not offered; internals are hidden.
  EXPECT_EQ(dlsym(lib, "ncclProfiler_v3"), nullptr);
  EXPECT_EQ(dlsym(lib, "ncclProfiler_v1"), nullptr);
  EXPECT_EQ(dlsym(lib, "_ZN4crux4core6Status8ToStringEv"), nullptr);
  dlclose(lib);
}

class PluginAbiTest : public PluginTest, public ::testing::WithParamInterface<std::string> {};

// A DDP-like rank (4 buckets x 25 MB all-reduce per 100 ms iteration, 4 ranks on 2 nodes)
// converges to the right period and bytes within 10 iterations, through every ABI version.
TEST_P(PluginAbiTest, DdpSequenceConvergesWithinTenIterations) {
  HostSink sink(socket_);
  ASSERT_TRUE(sink.status().ok()) << sink.status().ToString();
  ChildProcess rank;
  ASSERT_TRUE(StartRank(
      rank, GetParam(),
      {"--rank", "1", "--nranks", "4", "--nnodes", "2", "--comm-hash", "0x1234abcd5678ef00",
       "--iterations", "10", "--period-ms", "100", "--buckets", "4", "--bucket-bytes", "25000000"},
      {"CRUX_JOB_ID=llama-" + GetParam(), "CRUX_NCCL_SAMPLE_EVERY_MS=0"}));
  const auto exit = rank.Wait(std::chrono::seconds(30));
  ASSERT_EQ(exit, 0) << rank.Stderr() << rank.Stdout();
  // Coll | P2p | KernelCh.
  EXPECT_NE(rank.Stdout().find("mask=0x46"), std::string::npos) << rank.Stdout();
  sink.Poll();
  EXPECT_TRUE(sink.errors().empty()) << sink.errors().front();

  auto hellos = sink.All<hostd::Hello>();
  ASSERT_FALSE(hellos.empty());
  EXPECT_EQ(hellos[0].first, rank.pid());
  EXPECT_EQ(hellos[0].second.role, hostd::Role::kProfiler);
  EXPECT_EQ(hellos[0].second.job_id, "llama-" + GetParam());
  EXPECT_EQ(hellos[0].second.job_source, "CRUX_JOB_ID");
  EXPECT_EQ(hellos[0].second.abi, GetParam());

  auto comms = sink.All<hostd::CommInfo>();
  ASSERT_FALSE(comms.empty());
  EXPECT_EQ(comms[0].second.hash, 0x1234abcd5678ef00ull);
  EXPECT_EQ(comms[0].second.rank, 1);
  EXPECT_EQ(comms[0].second.nranks, 4);
  EXPECT_EQ(comms[0].second.nnodes, 2);

  auto profiles = sink.All<hostd::RankProfile>();
  ASSERT_FALSE(profiles.empty()) << rank.Stderr();
  const hostd::RankProfile& p = profiles.front().second;
  EXPECT_EQ(p.job_id, "llama-" + GetParam());
  EXPECT_TRUE(p.converged);
  EXPECT_LE(p.samples, 10u);
  EXPECT_NEAR(static_cast<double>(p.period_ns), 100e6, 2e6);
  ASSERT_EQ(p.comms.size(), 1u);
  EXPECT_EQ(p.comms[0].hash, 0x1234abcd5678ef00ull);
  // AllReduce ring estimate: 2 (n-1)/n x 25 MB x 4 buckets = 150 MB per iteration.
  EXPECT_NEAR(static_cast<double>(p.comms[0].bytes), 150e6, 1.5e6);
  EXPECT_TRUE(p.comms[0].peers.empty());  // No sampling window: no peer split.
  // Communication: 4 buckets of 25 ms - 1 us each, back to back -> ~25 ms of the 100 ms.
  EXPECT_NEAR(static_cast<double>(p.comm_ns), 25e6, 1e6);

  auto stats = sink.All<hostd::PluginStats>();
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(stats.back().second.dropped, 0u);
  EXPECT_EQ(stats.back().second.collectives, 40u);
}

INSTANTIATE_TEST_SUITE_P(Versions, PluginAbiTest, ::testing::Values("v4", "v5", "v6"),
                         [](const auto& param_info) { return param_info.param; });

TEST_F(PluginTest, JobIdFollowsTheRule) {
  HostSink sink(socket_);
  ASSERT_TRUE(sink.status().ok());
  const std::vector<std::string> args = {
      "--rank",       "0",  "--nranks",  "2", "--comm-hash", "0xfeed000000000042",
      "--iterations", "10", "--pace-ms", "1"};
  struct Case {
    std::vector<std::string> env;
    std::string id;
    std::string source;
  };
  const std::vector<Case> cases = {
      {{"SLURM_JOB_ID=4242", "TORCHELASTIC_RUN_ID=abc"}, "slurm-4242", "SLURM_JOB_ID"},
      {{"TORCHELASTIC_RUN_ID=run 7"}, "torchelastic-run_7", "TORCHELASTIC_RUN_ID"},
      // torchrun's default run id "none" would merge unrelated jobs: ignored.
      {{"TORCHELASTIC_RUN_ID=none"}, "nccl-feed000000000042", "comm_hash"},
      {{}, "nccl-feed000000000042", "comm_hash"},
  };
  for (const Case& c : cases) {
    ChildProcess rank;
    std::vector<std::string> env = c.env;
    env.push_back("CRUX_NCCL_SAMPLE_EVERY_MS=0");
    ASSERT_TRUE(StartRank(rank, "v6", args, env));
    ASSERT_EQ(rank.Wait(std::chrono::seconds(30)), 0) << rank.Stderr();
    ASSERT_TRUE(sink.WaitFor(
        [&] {
          for (const auto& [pid, p] : sink.All<hostd::RankProfile>()) {
            if (pid == rank.pid()) return true;
          }
          return false;
        },
        std::chrono::seconds(5)))
        << c.id << ": " << rank.Stderr() << " hellos " << sink.All<hostd::Hello>().size()
        << " comms " << sink.All<hostd::CommInfo>().size() << " stats "
        << sink.All<hostd::PluginStats>().size()
        << (sink.All<hostd::PluginStats>().empty()
                ? std::string()
                : " collectives " +
                      std::to_string(sink.All<hostd::PluginStats>().back().second.collectives));
    for (const auto& [pid, p] : sink.All<hostd::RankProfile>()) {
      if (pid == rank.pid()) {
        EXPECT_EQ(p.job_id, c.id);
      }
    }
    for (const auto& [pid, h] : sink.All<hostd::Hello>()) {
      // The hello carries the environment's id; the comm-hash id appears with the profile.
      if (pid == rank.pid() && c.source != "comm_hash") {
        EXPECT_EQ(h.job_id, c.id);
        EXPECT_EQ(h.job_source, c.source);
      }
    }
  }
}

// Sampling windows turn on NCCL's proxy events: the real bytes per peer replace the estimate.
// Rank 1 of 4 on 2 nodes sends its ring traffic to rank 2 on the other node (all of it on the
// network); rank 0 sends to rank 1 on its own node (nothing reaches the NIC).
TEST_F(PluginTest, SamplingWindowsMeasureRealBytesPerPeer) {
  HostSink sink(socket_);
  ASSERT_TRUE(sink.status().ok());
  const std::vector<std::string> env = {"CRUX_JOB_ID=sampled", "CRUX_NCCL_SAMPLE_EVERY_MS=100",
                                        "CRUX_NCCL_SAMPLE_MS=150"};
  ChildProcess inter, intra;
  const std::vector<std::string> common = {"--nranks",     "4",  "--nnodes",  "2",
                                           "--iterations", "60", "--pace-ms", "10"};
  std::vector<std::string> a = {"--rank", "1"}, b = {"--rank", "0"};
  a.insert(a.end(), common.begin(), common.end());
  b.insert(b.end(), common.begin(), common.end());
  ASSERT_TRUE(StartRank(inter, "v6", a, env));
  ASSERT_TRUE(StartRank(intra, "v5", b, env));
  ASSERT_EQ(inter.Wait(std::chrono::seconds(30)), 0) << inter.Stderr();
  ASSERT_EQ(intra.Wait(std::chrono::seconds(30)), 0) << intra.Stderr();
  sink.Poll();
  std::optional<hostd::RankProfile> last_inter, last_intra;
  for (const auto& [pid, p] : sink.All<hostd::RankProfile>()) {
    if (pid == inter.pid()) last_inter = p;
    if (pid == intra.pid()) last_intra = p;
  }
  ASSERT_TRUE(last_inter.has_value());
  ASSERT_TRUE(last_intra.has_value());
  ASSERT_EQ(last_inter->comms.size(), 1u);
  ASSERT_EQ(last_inter->comms[0].peers.size(), 1u);
  EXPECT_EQ(last_inter->comms[0].peers[0].peer_rank, 2);
  // A window's edges bias neither way (tasks straddling one without proxy ops are left out).
  EXPECT_NEAR(static_cast<double>(last_inter->comms[0].peers[0].bytes), 150e6, 3e6);
  EXPECT_NEAR(static_cast<double>(last_inter->comms[0].bytes), 150e6, 3e6);
  ASSERT_EQ(last_intra->comms.size(), 1u);
  EXPECT_EQ(last_intra->comms[0].bytes, 0u);
  EXPECT_TRUE(last_intra->comms[0].peers.empty());
  auto stats = sink.All<hostd::PluginStats>();
  ASSERT_FALSE(stats.empty());
  uint64_t windows = 0;
  for (const auto& [pid, s] : stats) windows = std::max(windows, s.sampled_windows);
  EXPECT_GE(windows, 1u);
}

// P2p sends name their peer: the split is known without sampling.
TEST_F(PluginTest, P2pSendsSplitBytesByPeer) {
  HostSink sink(socket_);
  ASSERT_TRUE(sink.status().ok());
  ChildProcess rank;
  ASSERT_TRUE(StartRank(rank, "v6",
                        {"--rank", "0", "--nranks", "2", "--iterations", "10", "--buckets", "1",
                         "--bucket-bytes", "8000000", "--p2p-peer", "1"},
                        {"CRUX_JOB_ID=pp", "CRUX_NCCL_SAMPLE_EVERY_MS=0"}));
  ASSERT_EQ(rank.Wait(std::chrono::seconds(30)), 0) << rank.Stderr();
  sink.Poll();
  auto profiles = sink.All<hostd::RankProfile>();
  ASSERT_FALSE(profiles.empty());
  const auto& c = profiles.back().second.comms;
  ASSERT_EQ(c.size(), 1u);
  // All-reduce estimate 2 (2-1)/2 x 8 MB = 8 MB plus the 8 MB send.
  EXPECT_NEAR(static_cast<double>(c[0].bytes), 16e6, 0.2e6);
  ASSERT_EQ(c[0].peers.size(), 1u);
  EXPECT_EQ(c[0].peers[0].peer_rank, 1);
}

// Without crux-hostd the rank runs and finishes normally (nothing blocks, finalize is bounded),
// and a hostd that appears later gets the whole state.
TEST_F(PluginTest, NeverBlocksWithoutHostdAndCatchesUpWhenItAppears) {
  ChildProcess rank;
  ASSERT_TRUE(StartRank(rank, "v6",
                        {"--rank", "0", "--nranks", "2", "--iterations", "12", "--pace-ms", "1",
                         "--linger-ms", "1600"},
                        {"CRUX_JOB_ID=late", "CRUX_NCCL_SAMPLE_EVERY_MS=0"}));
  // The plugin tried to connect at its start and failed; its next try is 1 s later.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  HostSink sink(socket_);
  ASSERT_TRUE(sink.status().ok());
  EXPECT_TRUE(sink.WaitFor([&] { return !sink.All<hostd::RankProfile>().empty(); },
                           std::chrono::seconds(10)))
      << rank.Stderr();
  ASSERT_EQ(rank.Wait(std::chrono::seconds(30)), 0) << rank.Stderr();
  sink.Poll();
  EXPECT_FALSE(sink.All<hostd::Hello>().empty());
  EXPECT_FALSE(sink.All<hostd::CommInfo>().empty());
  EXPECT_EQ(sink.All<hostd::RankProfile>().front().second.job_id, "late");
}

}  // namespace
}  // namespace crux::testing_hostd
