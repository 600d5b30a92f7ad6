// cruxd config: defaults, every key's error path, live-reload classification, and every cruxd
// config shipped in configs/ parses (with its topology).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "crux/daemon/config/config.h"
#include "crux/spec/topology_spec.h"

namespace crux::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

core::Status ParseError(const std::string& yaml) {
  auto c = ParseConfig(yaml, "");
  return c.ok() ? core::Status::Ok() : c.status();
}

TEST(ConfigTest, BuiltinDefaultsAreValidAndInsecureOnLoopback) {
  DaemonConfig c = BuiltinDefaults();
  EXPECT_TRUE(ValidateConfig(c).ok());
  EXPECT_TRUE(c.insecure);
  EXPECT_EQ(c.topology, "embedded");
  EXPECT_THAT(c.client_endpoint, HasSubstr("127.0.0.1"));
  EXPECT_EQ(AdminEndpoint(c), "ipc://state/admin.sock");
  EXPECT_EQ(DatabasePath(c), "state/cruxd.sqlite");
  EXPECT_EQ(c.planner.levels, 8);
  EXPECT_EQ(c.planner.reserved_high_levels, 1);
  EXPECT_FALSE(c.planner.spray);
  EXPECT_GE(c.debounce_ms, 10);
  EXPECT_LE(c.debounce_ms, 100);
  auto topo = spec::ParseTopology(EmbeddedTopologyYaml(), "");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->hosts().size(), 16u);
}

TEST(ConfigTest, ReplanThresholdParses) {
  auto c = ParseConfig("insecure: true\nreplan_threshold_pct: 2.5\n", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->replan_threshold_pct, 2.5);
  EXPECT_DOUBLE_EQ(BuiltinDefaults().replan_threshold_pct, 10);
  auto zero = ParseConfig("insecure: true\nreplan_threshold_pct: 0\n", "");
  ASSERT_TRUE(zero.ok());
  EXPECT_DOUBLE_EQ(zero->replan_threshold_pct, 0);
}

TEST(ConfigTest, EmptyFileNeedsExplicitInsecure) {
  core::Status s = ParseError("");
  EXPECT_THAT(s.message(), HasSubstr("insecure: true"));
  EXPECT_TRUE(ParseError("insecure: true\n").ok());
}

TEST(ConfigTest, FullConfigParses) {
  auto c = ParseConfig(R"(
topology: topo/x.yaml
state_dir: /var/lib/cruxd
database: db.sqlite
client_endpoint: tcp://0.0.0.0:7000
admin_endpoint: ipc:///run/cruxd/admin.sock
curve: {enabled: true, server_secret_key_file: /etc/cruxd/server.key, authorized_keys_dir: /etc/cruxd/clients}
metrics_listen: 0.0.0.0:9000
planner: {levels: 4, reserved_high_levels: 1, reserved_low_levels: 1, topo_orders: 3, seed: 7, gpu_peak_tflops: 989.5, spray: true}
debounce_ms: 0
min_replan_interval_ms: 250
lease_ms: 5000
max_lease_ms: 60000
profiling_samples: 3
dry_run: true
log_level: debug
dscp_pool: [1, 2, 63]
)",
                       "/etc/cruxd");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(TopologyPath(*c), "/etc/cruxd/topo/x.yaml");
  EXPECT_EQ(DatabasePath(*c), "/var/lib/cruxd/db.sqlite");
  EXPECT_EQ(AdminEndpoint(*c), "ipc:///run/cruxd/admin.sock");
  EXPECT_TRUE(c->curve.enabled);
  EXPECT_FALSE(c->insecure);
  EXPECT_EQ(c->planner.levels, 4);
  EXPECT_EQ(c->planner.seed, 7u);
  EXPECT_DOUBLE_EQ(c->planner.gpu_peak_tflops, 989.5);
  EXPECT_EQ(c->debounce_ms, 0);
  EXPECT_EQ(c->min_replan_interval_ms, 250);
  EXPECT_EQ(c->lease_ms, 5000);
  EXPECT_EQ(c->profiling_samples, 3u);
  EXPECT_TRUE(c->dry_run);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_EQ(c->qos.dscp_pool, (std::vector<int>{1, 2, 63}));
  core::PlannerOptions o = ToPlannerOptions(c->planner);
  EXPECT_DOUBLE_EQ(o.gpu_peak_flops, 989.5e12);
  EXPECT_EQ(o.reserved_low_levels, 1);
  EXPECT_TRUE(c->planner.spray);
  EXPECT_TRUE(o.spray);  // A sprayed fabric: levels only, no ports (PlannerOptions::spray).
}

struct BadCase {
  const char* yaml;
  const char* key;  // The message must name this.
};

TEST(ConfigTest, EveryKeyErrorNamesTheKey) {
  const std::string ok = "insecure: true\n";
  const BadCase cases[] = {
      {"bogus: 1", "bogus: unknown key"},
      {"replan_threshold_pct: -1", "replan_threshold_pct: must be in [0, 1000]"},
      {"replan_threshold_pct: ten", "replan_threshold_pct: must be a number"},
      {"replan_threshold_pct: .nan", "replan_threshold_pct: must be a finite number (got .nan)"},
      {"replan_threshold_pct: nan", "replan_threshold_pct: must be a finite number (got nan)"},
      {"replan_threshold_pct: 1001", "replan_threshold_pct: must be in [0, 1000]"},
      {"topology: ''", "topology: must not be empty"},
      {"topology: [a]", "topology: must be a string"},
      {"state_dir: ''", "state_dir"},
      {"state_dir: {a: 1}", "state_dir: must be a string"},
      {"database: ''", "database"},
      {"client_endpoint: udp://x", "client_endpoint"},
      {"client_endpoint: ''", "client_endpoint"},
      {"admin_endpoint: tcp://127.0.0.1:1", "admin_endpoint"},
      {"admin_endpoint: 5", "admin_endpoint"},
      {"curve: 1", "curve: must be a map"},
      {"curve: {enabled: yes please}", "curve.enabled: must be true or false"},
      {"curve: {enabled: true}", "curve.server_secret_key_file: required"},
      {"curve: {enabled: true, server_secret_key_file: k}", "curve.authorized_keys_dir: required"},
      {"curve: {colour: red}", "curve.colour: unknown key"},
      {"curve: {server_secret_key_file: [x]}", "curve.server_secret_key_file: must be a string"},
      {"curve: {authorized_keys_dir: {}}", "curve.authorized_keys_dir: must be a string"},
      {"insecure: 1", "insecure: must be true or false"},
      {"metrics_listen: nohost", "metrics_listen"},
      {"metrics_listen: 'h:99999'", "metrics_listen: port"},
      {"metrics_listen: 'h:x'", "metrics_listen: port"},
      {"planner: 3", "planner: must be a map"},
      {"planner: {levels: 0}", "planner.levels: must be in [1, 64]"},
      {"planner: {levels: 65}", "planner.levels"},
      {"planner: {levels: '8'}", "planner.levels: must be an integer"},
      {"planner: {levels: 2.5}", "planner.levels: must be an integer"},
      {"planner: {reserved_high_levels: -1}", "planner.reserved_high_levels"},
      {"planner: {levels: 2, reserved_high_levels: 2}", "planner.reserved_high_levels"},
      {"planner: {reserved_low_levels: x}", "planner.reserved_low_levels"},
      {"planner: {topo_orders: 0}", "planner.topo_orders"},
      {"planner: {seed: -3}", "planner.seed"},
      {"planner: {gpu_peak_tflops: .nan}", "planner.gpu_peak_tflops"},
      {"planner: {gpu_peak_tflops: -1}", "planner.gpu_peak_tflops"},
      {"planner: {gpu_peak_tflops: '312'}", "planner.gpu_peak_tflops: must be a number"},
      {"planner: {k: 1}", "planner.k: unknown key"},
      {"planner: {spray: sometimes}", "planner.spray"},
      {"debounce_ms: -1", "debounce_ms"},
      {"debounce_ms: 60001", "debounce_ms"},
      {"min_replan_interval_ms: -5", "min_replan_interval_ms"},
      {"min_replan_interval_ms: 600001", "min_replan_interval_ms"},
      {"lease_ms: 99", "lease_ms"},
      {"lease_ms: 700000", "lease_ms"},
      {"max_lease_ms: 50", "max_lease_ms"},
      {"profiling_samples: 0", "profiling_samples"},
      {"dry_run: maybe", "dry_run: must be true or false"},
      {"log_level: loud", "log_level: must be one of"},
      {"log_level: [info]", "log_level: must be a string"},
      {"dscp_pool: 5", "dscp_pool: must be a list"},
      {"dscp_pool: []", "qos.dscp_pool: must not be empty"},
      {"dscp_pool: [1, 64]", "dscp_pool[1]: must be in [0, 63]"},
      {"dscp_pool: [1, 1]", "qos.dscp_pool[1]: DSCP 1 already used by qos.dscp_pool[0]"},
      {"dscp_pool: [x]", "dscp_pool[0]: must be an integer"},
      {"ha: 1", "ha: must be a map"},
      {"ha: {etcd_endpoints: 'ftp://a:2379'}", "ha.etcd_endpoints: each endpoint must be"},
      {"ha: {election: 'a/b'}", "ha.election: must be letters"},
      {"ha: {lease_ttl_s: 1}", "ha.lease_ttl_s: must be in [2, 300]"},
      {"ha: {etcd_tls: 1}", "ha.etcd_tls: must be a map"},
      {"ha: {etcd_tls: {ca: x}}", "ha.etcd_tls.ca: unknown key"},
      {"ha: {etcd_tls: {ca_file: [x]}}", "ha.etcd_tls.ca_file: must be a string"},
      {"ha: {etcd_tls: {cert_file: {}}}", "ha.etcd_tls.cert_file: must be a string"},
      {"ha: {etcd_tls: {key_file: [k]}}", "ha.etcd_tls.key_file: must be a string"},
      {"ha: {etcd_auth: [u]}", "ha.etcd_auth: must be a map"},
      {"ha: {etcd_auth: {password: x}}", "ha.etcd_auth.password: unknown key"},
      {"ha: {etcd_auth: {user: [u]}}", "ha.etcd_auth.user: must be a string"},
      {"ha: {etcd_auth: {password_file: {}}}", "ha.etcd_auth.password_file: must be a string"},
      {"ha: {etcd_endpoints: 'https://a:2379'}",
       "ha.etcd_tls.ca_file: required with https:// etcd endpoints"},
      {"ha: {etcd_endpoints: 'https://a:2379,http://b:2379', etcd_tls: {ca_file: ca.crt}}",
       "ha.etcd_endpoints: must be all http:// or all https://"},
      {"ha: {etcd_endpoints: 'http://a:2379', etcd_tls: {ca_file: ca.crt}}",
       "ha.etcd_tls: given, but ha.etcd_endpoints are http://"},
      {"ha: {etcd_tls: {cert_file: c.crt}}", "ha.etcd_tls.key_file: required with"},
      {"ha: {etcd_tls: {key_file: c.key}}", "ha.etcd_tls.cert_file: required with"},
      {"ha: {etcd_auth: {user: cruxd}}", "ha.etcd_auth.password_file: required with"},
      {"ha: {etcd_auth: {password_file: pw}}", "ha.etcd_auth.user: required with"},
      {"ha: {etcd_endpoints: 'http://a:2379', etcd_auth: {user: cruxd, password_file: pw}}",
       "ha.etcd_auth: needs https:// etcd endpoints"},
      {"debounce_ms: 1\ndebounce_ms: 2", "debounce_ms: duplicate key"},
      {"impact: 1", "impact: must be a map"},
      {"impact: {enabled: sometimes}", "impact.enabled: must be true or false"},
      {"impact: {top_jobs: -1}", "impact.top_jobs"},
      {"impact: {top_jobs: 1001}", "impact.top_jobs"},
      {"impact: {error_threshold: 0}", "impact.error_threshold"},
      {"impact: {error_threshold: .nan}", "impact.error_threshold"},
      {"impact: {horizon: 3}", "impact.horizon: unknown key"},
      {"[1, 2]", "document: must be a map"},
      {"a: [", "invalid YAML"},
  };
  for (const BadCase& c : cases) {
    const std::string yaml = c.yaml;
    const bool whole = yaml.rfind("insecure", 0) == 0 || yaml.rfind("[", 0) == 0;
    core::Status s = ParseError((whole ? "" : ok) + yaml + "\n");
    EXPECT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(s.message(), HasSubstr(c.key)) << c.yaml;
  }
}

TEST(ConfigTest, EtcdTlsAndAuthParseWithPathsFromTheConfigDirectory) {
  auto c = ParseConfig(R"(
insecure: true
ha:
  etcd_endpoints: "https://10.0.0.11:2379, https://10.0.0.12:2379"
  etcd_tls: {ca_file: etcd/ca.crt, cert_file: /etc/pki/cruxd.crt, key_file: etcd/cruxd.key}
  etcd_auth: {user: cruxd, password_file: etcd/password}
)",
                       "/etc/cruxd");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ha.etcd_tls.ca_file, "/etc/cruxd/etcd/ca.crt");
  EXPECT_EQ(c->ha.etcd_tls.cert_file, "/etc/pki/cruxd.crt");
  EXPECT_EQ(c->ha.etcd_tls.key_file, "/etc/cruxd/etcd/cruxd.key");
  EXPECT_EQ(c->ha.etcd_auth.user, "cruxd");
  EXPECT_EQ(c->ha.etcd_auth.password_file, "/etc/cruxd/etcd/password");
  // TLS without a client certificate (an etcd without --client-cert-auth) is allowed.
  EXPECT_TRUE(ParseConfig("insecure: true\nha: {etcd_endpoints: 'https://a:2379', etcd_tls: "
                          "{ca_file: ca.crt}}\n",
                          "")
                  .ok());
  // HA off: the rest of the block is not used, so not checked against the endpoints.
  EXPECT_TRUE(ParseConfig("insecure: true\nha: {etcd_tls: {ca_file: ca.crt}}\n", "").ok());

  // The effective config shows the resolved paths and parses back to the same settings.
  auto back = ParseConfig(EffectiveConfigYaml(*c), "/elsewhere");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ha.etcd_tls.ca_file, c->ha.etcd_tls.ca_file);
  EXPECT_EQ(back->ha.etcd_auth.password_file, c->ha.etcd_auth.password_file);
  EXPECT_EQ(back->ha.etcd_auth.user, "cruxd");

  // Restart-only.
  DaemonConfig d = *c;
  d.ha.etcd_tls.cert_file = "/etc/pki/cruxd-2.crt";
  d.ha.etcd_auth.user = "cruxd-2";
  EXPECT_THAT(RestartOnlyChanges(*c, d),
              ::testing::ElementsAre("ha.etcd_tls.cert_file", "ha.etcd_auth.user"));
}

TEST(ConfigTest, ErrorsCarryThePosition) {
  core::Status s = ParseError("insecure: true\nplanner:\n  levels: 0\n");
  EXPECT_THAT(s.message(), HasSubstr("line 3"));
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto c = LoadConfigFile("/nonexistent/cruxd.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), core::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/cruxd.yaml"));
}

TEST(ConfigTest, FileErrorsNameTheFile) {
  const fs::path dir = fs::temp_directory_path() / "crux_config_test";
  fs::create_directories(dir);
  const fs::path f = dir / "bad.yaml";
  std::ofstream(f) << "insecure: true\nlease_ms: 1\n";
  auto c = LoadConfigFile(f.string());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("bad.yaml"));
  EXPECT_THAT(c.status().message(), HasSubstr("lease_ms"));
  fs::remove_all(dir);
}

TEST(ConfigTest, RestartOnlyChangesAreReported) {
  DaemonConfig a = BuiltinDefaults();
  DaemonConfig b = a;
  b.dry_run = true;
  b.debounce_ms = 5;
  b.lease_ms = 2000;
  b.log_level = "debug";
  b.planner.levels = 4;
  b.profiling_samples = 2;
  EXPECT_TRUE(RestartOnlyChanges(a, b).empty());
  b.client_endpoint = "tcp://127.0.0.1:9";
  b.qos.dscp_pool = {1};
  b.curve.enabled = true;
  EXPECT_THAT(RestartOnlyChanges(a, b),
              ::testing::UnorderedElementsAre("client_endpoint", "qos.dscp_pool", "curve.enabled"));
}

TEST(ConfigTest, QosBlockIsParsedAndValidatedByCore) {
  auto c = ParseConfig(R"(insecure: true
qos:
  dscp_pool: [10, 12]
  level_tcs: [5, 4, 3]
  jobs_strict: false
  level_weights: [40, 20, 10]
  reserved:
    - {name: control, dscps: [48, 46], tc: 6, scheduler: STRICT}
    - {name: storage, dscps: [8], tc: 1, scheduler: DWRR, weight: 25, lossless: true}
  default_tc: 0
  default_weight: 5
  pfc: false
)",
                       "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->qos.dscp_pool, (std::vector<int>{10, 12}));
  EXPECT_EQ(c->qos.level_tcs, (std::vector<int>{5, 4, 3}));
  EXPECT_FALSE(c->qos.jobs_strict);
  EXPECT_EQ(c->qos.level_weights, (std::vector<int>{40, 20, 10}));
  ASSERT_EQ(c->qos.reserved.size(), 2u);
  EXPECT_EQ(c->qos.reserved[0].dscps, (std::vector<int>{48, 46}));
  EXPECT_EQ(c->qos.reserved[0].scheduler, core::SchedulerType::kStrict);
  EXPECT_EQ(c->qos.reserved[1].weight, 25);
  EXPECT_TRUE(c->qos.reserved[1].lossless);
  EXPECT_EQ(c->qos.default_weight, 5);
  EXPECT_FALSE(c->qos.pfc);
  // The effective config shows the block and parses back to the same values.
  auto back = ParseConfig(EffectiveConfigYaml(*c), "");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << EffectiveConfigYaml(*c);
  EXPECT_EQ(back->qos.reserved[1].weight, 25);
  EXPECT_EQ(back->qos.level_weights, c->qos.level_weights);
  EXPECT_EQ(back->qos.dscp_pool, c->qos.dscp_pool);
}

TEST(ConfigTest, BadQosBlockNamesTheKey) {
  struct BadQos {
    const char* yaml;
    const char* key;
  };
  const BadQos cases[] = {
      {"qos: 5", "qos: must be a map"},
      {"qos: {colours: [1]}", "qos.colours: unknown key"},
      {"qos: {dscp_pool: [1, 64]}", "qos.dscp_pool[1]: must be in [0, 63]"},
      {"qos: {dscp_pool: [8]}",
       "qos.reserved[1].dscps[0]: DSCP 8 already used by qos.dscp_pool[0]"},
      {"qos: {level_tcs: [5, 6]}", "TC 6 already used by qos.level_tcs[1]"},
      {"qos: {level_tcs: [9]}", "qos.level_tcs[0]: must be in [0, 7]"},
      {"qos: {num_tcs: 0}", "qos.num_tcs: must be in [1, 8]"},
      {"qos: {jobs_strict: maybe}", "qos.jobs_strict: must be true or false"},
      {"qos: {jobs_strict: false}", "qos.level_weights"},
      {"qos: {reserved: [{name: s, dscps: [8], tc: 1, scheduler: DWRR}]}",
       "qos.reserved[0].weight"},
      {"qos: {reserved: [{name: s, dscps: [8], tc: 1, scheduler: STRICT, weight: 5}]}",
       "qos.reserved[0].weight: must be 0"},
      {"qos: {reserved: [{name: s, dscps: [8], tc: 1, scheduler: FAST}]}",
       "qos.reserved[0].scheduler"},
      {"qos: {reserved: [{name: s, tc: 1, scheduler: STRICT}]}",
       "qos.reserved[0].dscps: missing required key"},
      {"qos: {reserved: [{name: s, dscps: [8], tc: 1, scheduler: DWRR, weight: 101}]}",
       "qos.reserved[0].weight: must be in [0, 100]"},
      {"qos: {default_weight: 0}", "qos.default_weight: must be in [1, 100]"},
      {"dscp_pool: [1]\nqos: {dscp_pool: [2]}", "dscp_pool: given twice"},
  };
  for (const BadQos& c : cases) {
    core::Status s = ParseError(std::string("insecure: true\n") + c.yaml + "\n");
    EXPECT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), core::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(s.message(), HasSubstr(c.key)) << c.yaml;
  }
}

TEST(ConfigTest, ShippedConfigFileParses) {
  auto c = LoadConfigFile(std::string(CRUX_SOURCE_DIR) + "/configs/cruxd.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->qos.dscp_pool, core::QosConfig().dscp_pool);
  ASSERT_EQ(c->qos.reserved.size(), 2u);
  EXPECT_EQ(c->qos.reserved[1].name, "storage");
  EXPECT_EQ(c->qos.reserved[1].weight, 40);
}

TEST(ConfigTest, EffectiveConfigRoundTrips) {
  DaemonConfig a = BuiltinDefaults();
  a.qos.dscp_pool = {3, 4};
  a.dry_run = true;
  const std::string text = EffectiveConfigYaml(a);
  auto b = ParseConfig(text, "");
  ASSERT_TRUE(b.ok()) << b.status().ToString() << "\n" << text;
  EXPECT_EQ(b->qos.dscp_pool, a.qos.dscp_pool);
  EXPECT_TRUE(b->dry_run);
  EXPECT_EQ(b->client_endpoint, a.client_endpoint);
}

// Every cruxd config shipped in configs/ (cruxd*.yaml) parses and its topology loads.
TEST(ConfigTest, ShippedConfigsParse) {
  const fs::path configs = fs::path(CRUX_SOURCE_DIR) / "configs";
  int seen = 0;
  for (const auto& e : fs::directory_iterator(configs)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.rfind("cruxd", 0) != 0 || e.path().extension() != ".yaml") {
      continue;
    }
    ++seen;
    auto c = LoadConfigFile(e.path().string());
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    if (c->topology != kEmbeddedTopology) {
      auto t = spec::LoadTopologyFile(TopologyPath(*c));
      EXPECT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    }
  }
  EXPECT_GE(seen, 1);
}

}  // namespace
}  // namespace crux::daemon
