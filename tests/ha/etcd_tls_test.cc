// etcd over mutual TLS (issue #31): the gateway client against a real etcd member that serves
// https:// only and requires client certificates (certificates made by openssl in the test),
// then with etcd auth on and cruxd's user limited to its key prefix; and real cruxd processes
// over it: one with its certificate and user leads, one with a stranger's certificate stands by
// naming TLS, one whose certificate file is missing and one whose password file others may read
// do not start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "crux/daemon/ha/etcd_gateway.h"
#include "etcd_cluster.h"
#include "ha_cluster.h"

namespace crux::daemon::ha {
namespace {

using ha_test::EtcdCluster;
using ha_test::EtcdSecurity;
using ha_test::HaCluster;
using ha_test::WaitUntil;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr core::Duration kTimeout = core::Duration::Millis(1000);

// The error of a first call with `options` (OK when it worked).
core::Status FirstCall(const GatewayOptions& options) {
  auto etcd = ConnectGateway(options);
  if (!etcd.ok()) return etcd.status();
  return (*etcd)->Range("/crux/cruxd/", PrefixEnd("/crux/cruxd/")).status();
}

TEST(EtcdTlsOptionsTest, ConnectGatewayChecksTheTlsSettings) {
  const std::string https = "https://127.0.0.1:2379";
  auto error = [](const GatewayOptions& o) {
    auto etcd = ConnectGateway(o);
    return etcd.ok() ? std::string("OK") : etcd.status().message();
  };
  EXPECT_THAT(error({{https}, kTimeout}), HasSubstr("ha.etcd_tls.ca_file: required"));
  EXPECT_THAT(error({{https, "http://127.0.0.1:2380"}, kTimeout, "/etc/hostname"}),
              HasSubstr("not a mix"));
  EXPECT_THAT(error({{"http://127.0.0.1:2379"}, kTimeout, "/etc/hostname"}),
              HasSubstr("would not be used"));
  EXPECT_THAT(error({{https}, kTimeout, "/etc/hostname", "/etc/hostname"}),
              HasSubstr("go together"));
  EXPECT_THAT(error({{https}, kTimeout, "/nonexistent/ca.crt"}),
              HasSubstr("ha.etcd_tls.ca_file '/nonexistent/ca.crt': cannot read it"));
  EXPECT_THAT(error({{"http://127.0.0.1:2379"}, kTimeout, "", "", "", "cruxd", "pw"}),
              HasSubstr("needs https://"));
  EXPECT_EQ(error({{https}, kTimeout, "/etc/hostname"}), "OK");
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::TlsAvailable()) {
      GTEST_SKIP() << "etcd-server, etcd-client or openssl not installed (scripts/deps.sh)";
    }
    ASSERT_TRUE(cluster_.Start()) << "etcd over TLS did not come up";
  }
  EtcdCluster cluster_{1, EtcdSecurity::kTls};
};

TEST_F(EtcdTlsTest, OnlyAClientWithATrustedCertificateIsServed) {
  auto etcd = ConnectGateway(cluster_.Client(kTimeout));
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto lease = (*etcd)->Grant(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE((*etcd)->Txn({}, {TxnOp::Put("/t/a", "1", lease->id)}, {}).ok());
  auto got = (*etcd)->Range("/t/a", "");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].value, "1");
  EXPECT_TRUE((*etcd)->KeepAlive(lease->id).ok());
  EXPECT_TRUE((*etcd)->Revoke(lease->id).ok());

  const ha_test::TestPki& pki = cluster_.pki();
  GatewayOptions none = cluster_.Client(kTimeout);
  none.cert_file.clear();
  none.key_file.clear();
  GatewayOptions stranger = cluster_.Client(kTimeout);
  stranger.cert_file = pki.Crt("stranger");
  stranger.key_file = pki.Key("stranger");
  GatewayOptions wrong_key = cluster_.Client(kTimeout);
  wrong_key.key_file = pki.Key("stranger");
  GatewayOptions wrong_ca = cluster_.Client(kTimeout);
  wrong_ca.ca_file = pki.Crt("stranger-ca");
  for (const auto& [name, options, says] :
       {std::tuple{"no client certificate", none, "closed the connection"},
        std::tuple{"a certificate from another CA", stranger, "closed the connection"},
        std::tuple{"the key of another certificate", wrong_key, "client certificate or key"},
        std::tuple{"a member certificate from an untrusted CA", wrong_ca, "not trusted"}}) {
    const core::Status s = FirstCall(options);
    EXPECT_EQ(s.code(), core::StatusCode::kUnavailable) << name << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("TLS: ")) << name;
    EXPECT_THAT(s.message(), HasSubstr(says)) << name;
  }
}

TEST_F(EtcdTlsTest, AuthLimitsTheUserToItsPrefix) {
  ASSERT_EQ(cluster_.EnableAuth("cruxd", "s3cret", "/crux/cruxd/"), "");
  auto etcd = ConnectGateway(cluster_.Client(kTimeout));
  ASSERT_TRUE(etcd.ok());
  // Everything cruxd does, under its prefix.
  auto lease = (*etcd)->Grant(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const Compare absent{
      "/crux/cruxd/election/a", Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, {}};
  auto put = (*etcd)->Txn({absent}, {TxnOp::Put("/crux/cruxd/election/a", "x", lease->id)},
                          {TxnOp::Get("/crux/cruxd/election/a")});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(put->succeeded);
  ASSERT_TRUE((*etcd)->Txn({}, {TxnOp::Put("/crux/cruxd/state/epoch", "1")}, {}).ok());
  auto listed = (*etcd)->Range("/crux/cruxd/", PrefixEnd("/crux/cruxd/"), true);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->kvs.size(), 2u);
  EXPECT_TRUE((*etcd)->KeepAlive(lease->id).ok());
  EXPECT_TRUE((*etcd)->Status().ok());

  // Nothing outside it.
  for (const core::Status& s :
       {(*etcd)->Txn({}, {TxnOp::Put("/elsewhere", "1")}, {}).status(),
        (*etcd)->Range("/crux/other/", PrefixEnd("/crux/other/")).status()}) {
    EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("permission denied"));
  }

  // etcd forgets the token (the same password set again invalidates the user's tokens): the
  // next call authenticates again.
  ASSERT_EQ(
      cluster_.Etcdctl({"user", "passwd", "cruxd", "--interactive=false"}, "s3cret\n").exit_code,
      0);
  EXPECT_TRUE((*etcd)->Revoke(lease->id).ok());

  GatewayOptions wrong_password = cluster_.Client(kTimeout);
  wrong_password.password = "guess";
  GatewayOptions no_user = cluster_.Client(kTimeout);
  no_user.user.clear();
  no_user.password.clear();
  GatewayOptions named_cert = cluster_.Client(kTimeout);  // CN=root: refused on the gateway.
  named_cert.cert_file = cluster_.pki().Crt("root");
  named_cert.key_file = cluster_.pki().Key("root");
  for (const auto& [name, options, says] :
       {std::tuple{"a wrong password", wrong_password, "refused user 'cruxd'"},
        std::tuple{"no user", no_user, "auth enabled"},
        std::tuple{"a certificate with a Common Name", named_cert, "Common Name"}}) {
    const core::Status s = FirstCall(options);
    EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition) << name << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(says)) << name;
  }
}

// Real cruxd processes over TLS etcd with auth: a (its certificate and user) leads; b (a
// stranger's certificate) stays up without leading and says TLS, as it does for an unreachable
// etcd; c (a missing certificate file) and d (a password file others may read) exit at start
// naming the file.
TEST(CruxdOverTlsTest, LeadsWithItsCertificateAndNotWithout) {
  if (!EtcdCluster::TlsAvailable()) {
    GTEST_SKIP() << "etcd-server, etcd-client or openssl not installed (scripts/deps.sh)";
  }
  HaCluster ha(4, /*etcd_members=*/1, EtcdSecurity::kTls);
  ASSERT_TRUE(ha.StartEtcd());
  ASSERT_EQ(ha.etcd().EnableAuth("cruxd", "s3cret", "/crux/cruxd/"), "");
  const std::string ca = ha.etcd().pki().Crt("ca");
  ha.StartCruxd(1, ha.EtcdSecurityYaml("stranger", "stranger"));
  ha.StartCruxd(2,
                "  etcd_tls: {ca_file: \"" + ca +
                    "\", cert_file: /nonexistent/cruxd.crt, key_file: /nonexistent/cruxd.key}\n");
  // d: the right password, in a file others may read.
  const system_test::fs::path loose = ha.dir() / "loose-password";
  system_test::WriteFile(loose, "s3cret\n");
  system_test::fs::permissions(loose, system_test::fs::perms::owner_read |
                                          system_test::fs::perms::owner_write |
                                          system_test::fs::perms::others_read);
  std::string d_yaml = ha.EtcdSecurityYaml("client", "client");
  const std::string pw = ha.etcd().password_file().string();
  d_yaml.replace(d_yaml.find(pw), pw.size(), loose.string());
  ha.StartCruxd(3, d_yaml);
  ha.StartCruxd(0);
  EXPECT_EQ(ha.WaitLeader(milliseconds(10000)), 0) << ha.Log(0);

  const std::optional<int> c_exit = ha.process(2).Wait(milliseconds(10000));
  ASSERT_TRUE(c_exit.has_value());
  EXPECT_EQ(*c_exit, 2);  // cruxd's exit code for a configuration it cannot start with.
  EXPECT_THAT(ha.Log(2), HasSubstr("ha.etcd_tls.cert_file '/nonexistent/cruxd.crt': cannot read"));
  const std::optional<int> d_exit = ha.process(3).Wait(milliseconds(10000));
  ASSERT_TRUE(d_exit.has_value());
  EXPECT_EQ(*d_exit, 2);
  EXPECT_THAT(ha.Log(3), HasSubstr("mode 0604 lets others read the password"));
  // cruxd --check-config finds the same without starting.
  const system_test::CommandResult check = system_test::RunCommand(
      {CRUXD_BINARY, "--check-config", "--config", (ha.dir() / "d.yaml").string()}, ha.dir(),
      milliseconds(10000));
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_THAT(check.err, HasSubstr("ha.etcd_auth.password_file"));

  ASSERT_TRUE(
      WaitUntil([&] { return ha.Log(1).find("TLS: ") != std::string::npos; }, milliseconds(10000)))
      << ha.Log(1);
  EXPECT_THAT(ha.Log(1), HasSubstr("cannot campaign"));
  const std::optional<v1::StatusReply> b = ha.Status(1);
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(b->ha().role(), "leader");
  EXPECT_THAT(b->ha().etcd_error(), HasSubstr("TLS: "));
  EXPECT_EQ(b->ha().leader(), "");  // It cannot even read who leads.
  EXPECT_TRUE(ha.process(1).running());
  EXPECT_TRUE(ha.IsLeader(0));

  // a's keys are all under its prefix (its user may write nowhere else).
  const auto keys = ha.etcd().Etcdctl({"get", "--prefix", "--keys-only", "/crux/cruxd/election/"});
  EXPECT_THAT(keys.out, HasSubstr("/crux/cruxd/election/"));
}

}  // namespace
}  // namespace crux::daemon::ha
