// crux-hostd's NIC counters (HostTelemetry) at cruxd's gateway: a whole Daemon on a fake-clock
// loop (daemon_test_util.h). Accepted reports are acknowledged (their signals go to the fault
// manager, whose NIC records are core's to show); a host speaks only for its own NICs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;
using namespace crux::daemon::testing;  // NOLINT(build/namespaces)

using HostTelemetryTest = DaemonFixture;

v1::Envelope Telemetry(const std::string& host, const std::vector<std::string>& nics,
                       uint64_t rid = 7) {
  return NicReport(host, rid, nics, /*seq_errors=*/3);
}

TEST_F(HostTelemetryTest, AHostsOwnNicCountersAreAcknowledged) {
  const v1::Envelope reply =
      Client("hostd-host3", Telemetry("host3", {"host3/nic0", "host3/nic1"}));
  ASSERT_TRUE(reply.has_ack()) << reply.DebugString();
  EXPECT_EQ(reply.request_id(), 7u);
  // NICs the topology does not know are skipped (logged once), the report still counts.
  const v1::Envelope unknown = Client("hostd-host3", Telemetry("host3", {"host3/nic9"}, 8));
  EXPECT_TRUE(unknown.has_ack()) << unknown.DebugString();
  EXPECT_TRUE(Client("hostd-host3", Telemetry("host3", {"host3/nic9"}, 9)).has_ack());
}

TEST_F(HostTelemetryTest, AnotherHostsNicOrAnUnknownHostIsRefusedNamingTheField) {
  const v1::Envelope foreign =
      Client("hostd-host3", Telemetry("host3", {"host3/nic0", "host4/nic0"}));
  ASSERT_TRUE(foreign.has_error());
  EXPECT_EQ(foreign.error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(foreign.error().message(),
              HasSubstr("host_telemetry.nics[1].nic: 'host4/nic0' is a NIC of 'host4'"));
  const v1::Envelope nohost = Client("hostd-x", Telemetry("host99", {}));
  ASSERT_TRUE(nohost.has_error());
  EXPECT_EQ(nohost.error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  EXPECT_THAT(nohost.error().message(), HasSubstr("host_telemetry.host"));
  const v1::Envelope sw = Client("hostd-x", Telemetry("tor0", {}));
  EXPECT_EQ(sw.error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unknown_host\"} 2"));
  // The refusals changed nothing: the next good report is acknowledged.
  EXPECT_TRUE(Client("hostd-host3", Telemetry("host3", {"host3/nic0"}, 10)).has_ack());
}

}  // namespace
}  // namespace crux::daemon
