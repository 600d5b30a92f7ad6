// crux-hostd's config: the shipped example parses; mistakes are errors naming key and line.
#include "crux/hostd/config.h"

#include <gtest/gtest.h>

#include <string>

#include "crux/textio/file.h"

namespace crux::hostd {
namespace {

TEST(HostdConfigTest, ShippedExampleParses) {
  auto c = LoadHostdConfig(std::string(CRUX_SOURCE_DIR) + "/hostd/hostd.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "host0");
  EXPECT_EQ(c->daemon_endpoint, "tcp://cruxd:7450");
  EXPECT_TRUE(c->insecure);
  ASSERT_EQ(c->nics.size(), 2u);
  EXPECT_EQ(c->nics[1], (NicConfig{"host0/nic1", "mlx5_1", "::ffff:10.0.1.1"}));
  EXPECT_EQ(c->nic_by_address.at("::ffff:10.0.0.1"), "host0/nic0");
  EXPECT_EQ(c->nic_counters_interval_ms, 1000);
  EXPECT_EQ(c->sysfs_root, "/sys");
  EXPECT_EQ(c->probes, ProbeConfig{});        // Spelled out, off.
  EXPECT_EQ(c->limits, LocalLimitsConfig{});  // Spelled out, the defaults.
}

TEST(HostdConfigTest, NicCounterKeys) {
  auto c = ParseHostdConfig(
      "host: h\ndaemon: tcp://x:1\ninsecure: true\nnic_counters_interval_ms: 0\n"
      "sysfs_root: /tmp/fake-sys\nnics:\n  - {name: h/nic0, device: mlx5_0, port: 2}\n"
      "  - {name: h/nic1, device: mlx5_1}\n",
      "/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nic_counters_interval_ms, 0);
  EXPECT_EQ(c->sysfs_root, "/tmp/fake-sys");
  EXPECT_EQ(c->nics[0].port, 2u);
  EXPECT_EQ(c->nics[1].port, 1u);  // The default.
}

TEST(HostdConfigTest, ProbeKeys) {
  auto off = ParseHostdConfig("host: h\ndaemon: tcp://x:1\ninsecure: true\n", "/");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->probes, ProbeConfig{});  // Off, port 18515, 1000 ms, 3, 200 ms.
  EXPECT_FALSE(off->probes.enabled);
  auto c = ParseHostdConfig(
      "host: h\ndaemon: tcp://x:1\ninsecure: true\n"
      "probes: {enabled: true, port: 20000, interval_ms: 500, count: 5, timeout_ms: 100}\n",
      "/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->probes, (ProbeConfig{true, 20000, 500, 5, 100}));
  auto err = [](const std::string& probes) {
    auto r = ParseHostdConfig("host: h\ndaemon: tcp://x:1\ninsecure: true\nprobes: " + probes, "/");
    EXPECT_FALSE(r.ok()) << probes;
    return r.status().message();
  };
  EXPECT_NE(err("{port: 0}\n").find("probes.port"), std::string::npos);
  EXPECT_NE(err("{port: 70000}\n").find("probes.port"), std::string::npos);
  EXPECT_NE(err("{count: 0}\n").find("probes.count"), std::string::npos);
  EXPECT_NE(err("{interval_ms: 5}\n").find("probes.interval_ms"), std::string::npos);
  EXPECT_NE(err("{enabled: yes}\n").find("probes.enabled"), std::string::npos);
  EXPECT_NE(err("{rate: 1}\n").find("probes.rate: unknown key"), std::string::npos);
  EXPECT_NE(err("{interval_ms: 100, timeout_ms: 200}\n")
                .find("probes.timeout_ms: must be <= probes.interval_ms"),
            std::string::npos);
  // Capacity trains: 0 (none) or 2-1024 datagrams of 64-65000 bytes.
  auto t = ParseHostdConfig(
      "host: h\ndaemon: tcp://x:1\ninsecure: true\nprobes: {train_count: 0, train_bytes: 9000}\n",
      "/");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->probes.train_count, 0);
  EXPECT_EQ(t->probes.train_bytes, 9000);
  EXPECT_EQ(ProbeConfig{}.train_count, 32);
  EXPECT_EQ(ProbeConfig{}.train_bytes, 1472);
  EXPECT_NE(err("{train_count: 1}\n")
                .find("probes.train_count: must be 0 (no capacity probes) or "
                      "2-1024"),
            std::string::npos);
  EXPECT_NE(err("{train_count: 1025}\n").find("probes.train_count"), std::string::npos);
  EXPECT_NE(err("{train_bytes: 63}\n").find("probes.train_bytes"), std::string::npos);
  EXPECT_NE(err("{train_bytes: 65001}\n").find("probes.train_bytes"), std::string::npos);
}

TEST(HostdConfigTest, LimitKeys) {
  auto d = ParseHostdConfig("host: h\ndaemon: tcp://x:1\ninsecure: true\n", "/");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->limits.jobs_per_uid, 8u);  // The defaults.
  EXPECT_EQ(d->limits.ranks_per_uid, 64u);
  EXPECT_EQ(d->limits.jobs_non_root, 48u);
  auto c = ParseHostdConfig(
      "host: h\ndaemon: tcp://x:1\ninsecure: true\n"
      "limits: {jobs_per_uid: 2, ranks_per_uid: 0, jobs_non_root: 20}\n",
      "/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->limits, (LocalLimitsConfig{2, 0, 20}));
  auto bad = ParseHostdConfig(
      "host: h\ndaemon: tcp://x:1\ninsecure: true\nlimits: {jobs_per_uid: -1}\n", "/");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("limits.jobs_per_uid"), std::string::npos)
      << bad.status().message();
  auto unknown =
      ParseHostdConfig("host: h\ndaemon: tcp://x:1\ninsecure: true\nlimits: {jobs: 3}\n", "/");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown key"), std::string::npos)
      << unknown.status().message();
}

TEST(HostdConfigTest, NicAddressesFileJoinsTheMap) {
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(
      textio::WriteTextFile(dir + "/addr.yaml", "10.0.3.1: host3/nic0\n\"fe80::5\": host5/nic1\n")
          .ok());
  auto c = ParseHostdConfig(
      "host: host0\ndaemon: tcp://x:1\ninsecure: true\nnic_addresses: addr.yaml\n", dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nic_by_address.at("::ffff:10.0.3.1"), "host3/nic0");
  EXPECT_EQ(c->nic_by_address.at("fe80::5"), "host5/nic1");
}

TEST(HostdConfigTest, MistakesNameTheKey) {
  auto err = [](const std::string& yaml) {
    auto c = ParseHostdConfig(yaml, "/");
    EXPECT_FALSE(c.ok()) << yaml;
    return c.status().message();
  };
  EXPECT_NE(err("host: h\n").find("daemon: missing required key"), std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\n").find("server_key and client_key are required"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nsocks: /x\n").find("unknown key"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nnics:\n  - {name: g/nic0, "
                "device: mlx5_0}\n")
                .find("nics[0].name: must be a NIC of host 'h'"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nnics:\n  - {name: h/nic0, "
                "device: mlx5_0, address: 10.0.0}\n")
                .find("nics[0].address"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nnics:\n  - {name: h/nic0, "
                "device: mlx5_0, port: 0}\n")
                .find("nics[0].port"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nnics:\n  - {name: h/nic0, "
                "device: ../mlx5_0}\n")
                .find("nics[0].device: must be an RDMA device name"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nnic_counters_interval_ms: -5\n")
                .find("nic_counters_interval_ms"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nsysfs_root: \"\"\n")
                .find("sysfs_root: is empty"),
            std::string::npos);
  EXPECT_NE(err("host: h\ndaemon: tcp://x:1\ninsecure: true\nregister_delay_ms: -1\n")
                .find("register_delay_ms"),
            std::string::npos);
}

}  // namespace
}  // namespace crux::hostd
