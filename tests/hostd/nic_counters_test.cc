// NIC RDMA counters in crux-hostd: the sysfs reader over a fake tree in a temp directory, the
// delta rule, and the agent sending HostTelemetry from scripted readings and times.
#include "crux/hostd/nic_counters.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crux/hostd/config.h"
#include "crux/hostd/host_agent.h"

namespace crux::hostd {
namespace {

using core::Duration;
namespace fs = std::filesystem;

class SysfsNicCountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("crux_nic_counters_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(::getpid()));
    fs::remove_all(root_);
    dir_ = SysfsNicCounters::CounterDir(root_.string(), "mlx5_0", 1);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ + "/" + name) << content;
  }
  // All eight counters at `base` + their index.
  void WriteAll(uint64_t base) {
    for (size_t i = 0; i < kNicCounterCount; ++i) {
      Write(std::string(kNicCounterNames[i]), std::to_string(base + i) + "\n");
    }
  }
  NicCounterReading Read() {
    SysfsNicCounters reader(root_.string());
    return reader.Read(nic_);
  }

  fs::path root_;
  std::string dir_;
  NicConfig nic_{"host1/nic0", "mlx5_0", "", 1};
};

TEST_F(SysfsNicCountersTest, ReadsEveryCounterFileAsWrittenBySysfs) {
  EXPECT_EQ(dir_, root_.string() + "/class/infiniband/mlx5_0/ports/1/hw_counters");
  WriteAll(100);
  const NicCounterReading r = Read();
  EXPECT_TRUE(r.errors.empty());
  for (size_t i = 0; i < kNicCounterCount; ++i) {
    ASSERT_TRUE(r.values[i].has_value()) << kNicCounterNames[i];
    EXPECT_EQ(*r.values[i], 100 + i) << kNicCounterNames[i];
  }
}

TEST_F(SysfsNicCountersTest, DeltasFollowTheFilesBetweenTwoReadings) {
  WriteAll(100);
  const NicCounterReading first = Read();
  Write("packet_seq_err", "130\n");
  Write("np_cnp_sent", "1005\n");  // Index 5: was 105.
  const NicCounterReading second = Read();
  const auto d = NicCounterDelta(first, second);
  EXPECT_EQ(d[0], 30u);
  EXPECT_EQ(d[5], 900u);
  for (size_t i : {1, 2, 3, 4, 6, 7}) EXPECT_EQ(d[i], 0u) << kNicCounterNames[i];
}

TEST_F(SysfsNicCountersTest, AMissingCounterFileIsAbsentNotAnError) {
  WriteAll(7);
  fs::remove(dir_ + "/roce_adp_retrans");
  fs::remove(dir_ + "/roce_adp_retrans_to");
  const NicCounterReading r = Read();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_FALSE(r.values[3].has_value());
  EXPECT_FALSE(r.values[4].has_value());
  EXPECT_EQ(r.values[0], 7u);
  // A counter that appears later starts from its first reading (no delta from nothing).
  Write("roce_adp_retrans", "500\n");
  const auto d = NicCounterDelta(r, Read());
  EXPECT_EQ(d[3], 0u);
}

TEST_F(SysfsNicCountersTest, GarbageContentSkipsThatCounterAndNamesTheFile) {
  WriteAll(10);
  Write("out_of_sequence", "12abc\n");
  Write("np_cnp_sent", "");
  Write("rp_cnp_handled", "-5\n");
  const NicCounterReading r = Read();
  EXPECT_FALSE(r.values[1].has_value());
  EXPECT_FALSE(r.values[5].has_value());
  EXPECT_FALSE(r.values[6].has_value());
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0], dir_ + "/out_of_sequence: not a decimal integer (\"12abc?\")");
  EXPECT_NE(r.errors[1].find(dir_ + "/np_cnp_sent: not a decimal integer"), std::string::npos);
  EXPECT_NE(r.errors[2].find(dir_ + "/rp_cnp_handled: not a decimal integer"), std::string::npos);
  // Nothing else lost.
  EXPECT_EQ(r.values[0], 10u);
  EXPECT_EQ(r.values[7], 17u);
}

TEST_F(SysfsNicCountersTest, ACounterGoingBackwardsCountsAsZeroNotAWrap) {
  WriteAll(1000);
  const NicCounterReading before = Read();
  Write("local_ack_timeout_err", "3\n");  // Driver reload: 1002 -> 3.
  const NicCounterReading reloaded = Read();
  EXPECT_EQ(NicCounterDelta(before, reloaded)[2], 0u);
  Write("local_ack_timeout_err", "10\n");  // Counts again from the new base.
  EXPECT_EQ(NicCounterDelta(reloaded, Read())[2], 7u);
  // The reading as a whole is a reset: no deltas (issue #31).
  const NicJudgement j = JudgeNicCounters(before, reloaded, Duration::Millis(1000));
  EXPECT_EQ(j.verdict, NicVerdict::kReset);
  EXPECT_NE(j.why.find("local_ack_timeout_err went backwards (1002 -> 3)"), std::string::npos);
}

TEST_F(SysfsNicCountersTest, ThePortRateIsReadAndBoundsTheDeltas) {
  WriteAll(0);
  std::ofstream(root_ / "class/infiniband/mlx5_0/ports/1/rate") << "100 Gb/sec (4X EDR)\n";
  const NicCounterReading before = Read();
  ASSERT_TRUE(before.rate.has_value());
  EXPECT_EQ(*before.rate, core::Bandwidth::Gbps(100));
  // 100 Gb/s for 1 s (+1 s slack) is at most ~2.98e8 minimum-size frames.
  Write("np_cnp_sent", "200000000\n");
  EXPECT_EQ(JudgeNicCounters(before, Read(), Duration::Millis(1000)).verdict, NicVerdict::kOk);
  Write("packet_seq_err", "1000000000\n");
  const NicJudgement j = JudgeNicCounters(before, Read(), Duration::Millis(1000));
  EXPECT_EQ(j.verdict, NicVerdict::kImplausible);
  EXPECT_NE(j.why.find("packet_seq_err grew by 1000000000"), std::string::npos) << j.why;
}

TEST(ParsePortRateTest, ReadsTheSysfsRateFormat) {
  EXPECT_EQ(ParsePortRate("100 Gb/sec (4X EDR)\n"), core::Bandwidth::Gbps(100));
  EXPECT_EQ(ParsePortRate("2.5 Gb/sec (1X SDR)"), core::Bandwidth::Gbps(2.5));
  EXPECT_EQ(ParsePortRate("400 Gb/sec (4X NDR)"), core::Bandwidth::Gbps(400));
  EXPECT_EQ(ParsePortRate(""), std::nullopt);
  EXPECT_EQ(ParsePortRate("fast"), std::nullopt);
  EXPECT_EQ(ParsePortRate("0 Gb/sec"), std::nullopt);
  EXPECT_EQ(ParsePortRate("-1 Gb/sec"), std::nullopt);
}

TEST_F(SysfsNicCountersTest, AMissingDeviceOrPortIsOneErrorNamingTheDirectory) {
  nic_.port = 2;
  const NicCounterReading r = Read();
  for (const auto& v : r.values) EXPECT_FALSE(v.has_value());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("/class/infiniband/mlx5_0/ports/2/hw_counters: no such directory"),
            std::string::npos)
      << r.errors[0];
}

TEST(ParseCounterValueTest, AcceptsDecimalIntegersOnly) {
  EXPECT_EQ(ParseCounterValue("0\n"), 0u);
  EXPECT_EQ(ParseCounterValue(" 18446744073709551615\n"), 18446744073709551615u);
  EXPECT_EQ(ParseCounterValue("18446744073709551616"), std::nullopt);  // Does not fit.
  EXPECT_EQ(ParseCounterValue(""), std::nullopt);
  EXPECT_EQ(ParseCounterValue("\n"), std::nullopt);
  EXPECT_EQ(ParseCounterValue("+1"), std::nullopt);
  EXPECT_EQ(ParseCounterValue("0x10"), std::nullopt);
  EXPECT_EQ(ParseCounterValue("1 2"), std::nullopt);
}

// ---- the agent ----

// Readings scripted per device; a device without one reads as all-absent.
class ScriptedNicCounters : public NicCounterSource {
 public:
  explicit ScriptedNicCounters(std::map<std::string, NicCounterReading>* next) : next_(next) {}
  NicCounterReading Read(const NicConfig& nic) override {
    ++reads;
    auto it = next_->find(nic.device);
    return it == next_->end() ? NicCounterReading{} : it->second;
  }
  int reads = 0;

 private:
  std::map<std::string, NicCounterReading>* next_;
};

NicCounterReading Reading(std::vector<std::optional<uint64_t>> v) {
  NicCounterReading r;
  for (size_t i = 0; i < v.size() && i < kNicCounterCount; ++i) r.values[i] = v[i];
  return r;
}

HostdConfig AgentConfig(int64_t interval_ms) {
  HostdConfig c;
  c.host = "host1";
  c.daemon_endpoint = "tcp://cruxd:7450";
  c.insecure = true;
  c.nics = {{"host1/nic0", "mlx5_0", "", 1}, {"host1/nic1", "mlx5_1", "", 2}};
  c.nic_counters_interval_ms = interval_ms;
  return c;
}

class HostAgentNicCountersTest : public ::testing::Test {
 protected:
  explicit HostAgentNicCountersTest(int64_t interval_ms = 1000) : agent_(AgentConfig(interval_ms)) {
    auto source = std::make_unique<ScriptedNicCounters>(&next_);
    source_ = source.get();
    agent_.SetNicCounterSource(std::move(source));
  }
  std::vector<v1::Envelope> At(Duration t) {
    now_ = t;
    agent_.Tick(now_);
    return agent_.TakeToDaemon();
  }
  nlohmann::json Status() { return nlohmann::json::parse(agent_.StatusJson()); }

  std::map<std::string, NicCounterReading> next_;
  ScriptedNicCounters* source_ = nullptr;
  HostAgent agent_;
  Duration now_;
};

TEST_F(HostAgentNicCountersTest, SendsTheDeltasOfTwoReadingsWithTheirInterval) {
  next_["mlx5_0"] = Reading({10, 20, 30, 40, 50, 60, 70, 80});
  next_["mlx5_1"] = Reading({1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_TRUE(At(Duration::Millis(0)).empty());  // The first reading only primes.
  EXPECT_EQ(agent_.NextWakeup(), Duration::Millis(1000));
  EXPECT_TRUE(At(Duration::Millis(500)).empty());  // Not due yet.
  EXPECT_EQ(source_->reads, 2);

  next_["mlx5_0"] = Reading({11, 22, 33, 44, 55, 66, 77, 88});
  next_["mlx5_1"] = Reading({1, 1, 1, 1, 1, 1, 1, 1});  // No change: zeros.
  const std::vector<v1::Envelope> sent = At(Duration::Millis(1010));
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_host_telemetry());
  EXPECT_NE(sent[0].request_id(), 0u);
  const v1::HostTelemetry& t = sent[0].host_telemetry();
  EXPECT_EQ(t.host(), "host1");
  EXPECT_EQ(t.seq(), 1u);
  ASSERT_EQ(t.nics_size(), 2);
  const v1::NicCounters& a = t.nics(0);
  EXPECT_EQ(a.nic(), "host1/nic0");
  EXPECT_EQ(a.device(), "mlx5_0");
  EXPECT_EQ(a.port(), 1u);
  EXPECT_EQ(a.interval_ns(), 1010u * 1000 * 1000);
  EXPECT_EQ(a.packet_seq_err(), 1u);
  EXPECT_EQ(a.out_of_sequence(), 2u);
  EXPECT_EQ(a.local_ack_timeout_err(), 3u);
  EXPECT_EQ(a.roce_adp_retrans(), 4u);
  EXPECT_EQ(a.roce_adp_retrans_to(), 5u);
  EXPECT_EQ(a.np_cnp_sent(), 6u);
  EXPECT_EQ(a.rp_cnp_handled(), 7u);
  EXPECT_EQ(a.np_ecn_marked_roce_packets(), 8u);
  EXPECT_EQ(t.nics(1).nic(), "host1/nic1");
  EXPECT_EQ(t.nics(1).port(), 2u);
  EXPECT_EQ(t.nics(1).packet_seq_err(), 0u);
  EXPECT_EQ(t.nics(1).np_ecn_marked_roce_packets(), 0u);

  // cruxd's Ack is the telemetry's, not a stray reply; the status shows the deltas.
  v1::Envelope ack;
  ack.set_protocol_version(1);
  ack.set_request_id(sent[0].request_id());
  ack.mutable_ack()->set_ok(true);
  agent_.OnDaemonMessage(ack, now_, 0);
  EXPECT_EQ(agent_.counters().nic_telemetry_acked, 1u);
  EXPECT_EQ(agent_.counters().stray_daemon_messages, 0u);
  const nlohmann::json s = Status()["nic_counters"];
  EXPECT_EQ(s["sent"], 1);
  EXPECT_EQ(s["acked"], 1);
  EXPECT_EQ(s["nics"][0]["deltas"]["np_cnp_sent"], 6);
  EXPECT_EQ(s["nics"][0]["loss"], 15);
  EXPECT_EQ(s["nics"][0]["congestion"], 21);
  EXPECT_EQ(s["nics"][0]["found"].size(), kNicCounterCount);
  EXPECT_DOUBLE_EQ(s["nics"][0]["rates_per_s"]["packet_seq_err"].get<double>(), 1 / 1.01);

  // The next report counts from the second reading.
  next_["mlx5_0"] = Reading({21, 22, 33, 44, 55, 66, 77, 88});
  const std::vector<v1::Envelope> again = At(Duration::Millis(2010));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].host_telemetry().seq(), 2u);
  EXPECT_EQ(again[0].host_telemetry().nics(0).packet_seq_err(), 10u);
  EXPECT_EQ(again[0].host_telemetry().nics(0).interval_ns(), 1000u * 1000 * 1000);
}

// Issue #31: a reading whose counters went backwards (a driver reload) or jumped beyond the
// port's rate (a garbled read, 2^64-1) is dropped: never sent to cruxd, counted, shown; the next
// delta counts from it.
TEST_F(HostAgentNicCountersTest, AResetOrAGarbledReadingIsDroppedAndNeverSent) {
  next_["mlx5_0"] = Reading({10, 20, 30, 40, 50, 60, 70, 80});
  next_["mlx5_1"] = Reading({1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_TRUE(At(Duration::Millis(0)).empty());
  next_["mlx5_0"] = Reading({0, 0, 0, 0, 0, 0, 0, 0});           // Reset.
  next_["mlx5_1"] = Reading({UINT64_MAX, 1, 1, 1, 1, 1, 1, 1});  // Garbled.
  EXPECT_TRUE(At(Duration::Millis(1000)).empty()) << "nothing to send";
  EXPECT_EQ(agent_.counters().nic_counter_resets, 1u);
  EXPECT_EQ(agent_.counters().nic_implausible_samples, 1u);
  const nlohmann::json s = Status()["nic_counters"];
  EXPECT_EQ(s["counter_resets"], 1);
  EXPECT_EQ(s["implausible_samples"], 1);
  EXPECT_NE(s["nics"][1]["last_dropped"].get<std::string>().find("packet_seq_err grew by"),
            std::string::npos);
  // Both count on from the dropped readings.
  next_["mlx5_0"] = Reading({5, 0, 0, 0, 0, 0, 0, 0});
  next_["mlx5_1"] = Reading({UINT64_MAX, 1, 1, 1, 1, 1, 1, 2});
  const std::vector<v1::Envelope> sent = At(Duration::Millis(2000));
  ASSERT_EQ(sent.size(), 1u);
  const v1::HostTelemetry& t = sent[0].host_telemetry();
  ASSERT_EQ(t.nics_size(), 2);
  EXPECT_EQ(t.nics(0).packet_seq_err(), 5u);
  EXPECT_EQ(t.nics(1).packet_seq_err(), 0u);
  EXPECT_EQ(t.nics(1).np_ecn_marked_roce_packets(), 1u);
}

TEST_F(HostAgentNicCountersTest, StatusShowsWhichCountersWereFoundAndTheReadErrors) {
  NicCounterReading r = Reading({1, 2, 3, std::nullopt, std::nullopt, 6, 7, 8});
  r.errors.push_back("/sys/x/roce_adp_retrans: not a decimal integer (\"?\")");
  next_["mlx5_0"] = r;
  At(Duration::Millis(0));
  const nlohmann::json nic = Status()["nic_counters"]["nics"][0];
  EXPECT_EQ(nic["found"].size(), 6u);
  EXPECT_EQ(nic["missing"], nlohmann::json({"roce_adp_retrans", "roce_adp_retrans_to"}));
  EXPECT_EQ(nic["errors"][0], "/sys/x/roce_adp_retrans: not a decimal integer (\"?\")");
  EXPECT_FALSE(nic.contains("deltas"));  // Primed only.
}

TEST_F(HostAgentNicCountersTest, ANicWithoutAnyCounterIsLeftOutNotReportedAsZeros) {
  next_["mlx5_0"] = Reading({5});
  NicCounterReading none;  // mlx5_1: no hw_counters directory.
  none.errors.push_back("/sys/class/infiniband/mlx5_1/ports/2/hw_counters: no such directory");
  next_["mlx5_1"] = none;
  At(Duration::Millis(0));
  next_["mlx5_0"] = Reading({6});
  const std::vector<v1::Envelope> sent = At(Duration::Millis(1000));
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].host_telemetry().nics_size(), 1);
  EXPECT_EQ(sent[0].host_telemetry().nics(0).nic(), "host1/nic0");
  EXPECT_EQ(sent[0].host_telemetry().nics(0).packet_seq_err(), 1u);
  const nlohmann::json nic1 = Status()["nic_counters"]["nics"][1];
  EXPECT_EQ(nic1["read"], false);
  EXPECT_EQ(nic1["errors"][0],
            "/sys/class/infiniband/mlx5_1/ports/2/hw_counters: no such directory");
  // No NIC with counters at all: nothing is sent.
  next_["mlx5_0"] = NicCounterReading{};
  EXPECT_TRUE(At(Duration::Millis(2000)).empty());
}

TEST_F(HostAgentNicCountersTest, ARefusalIsCountedAndShown) {
  next_["mlx5_0"] = Reading({1});
  At(Duration::Millis(0));
  const std::vector<v1::Envelope> sent = At(Duration::Millis(1000));
  ASSERT_EQ(sent.size(), 1u);
  v1::Envelope err;
  err.set_protocol_version(1);
  err.set_request_id(sent[0].request_id());
  err.mutable_error()->set_code(v1::ERROR_CODE_INVALID_ARGUMENT);
  err.mutable_error()->set_message("host_telemetry.host: 'host1' is not a host of the topology");
  agent_.OnDaemonMessage(err, now_, 0);
  EXPECT_EQ(agent_.counters().nic_telemetry_refused, 1u);
  EXPECT_EQ(Status()["nic_counters"]["last_error"],
            "host_telemetry.host: 'host1' is not a host of the topology");
}

class HostAgentNicCountersOffTest : public HostAgentNicCountersTest {
 protected:
  HostAgentNicCountersOffTest() : HostAgentNicCountersTest(0) {}
};

TEST_F(HostAgentNicCountersOffTest, IntervalZeroReadsAndSendsNothing) {
  next_["mlx5_0"] = Reading({1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(At(Duration::Millis(0)).empty());
  EXPECT_TRUE(At(Duration::Millis(5000)).empty());
  EXPECT_EQ(source_->reads, 0);
  EXPECT_TRUE(agent_.NextWakeup().IsInfinite());
  EXPECT_EQ(Status()["nic_counters"]["enabled"], false);
}

}  // namespace
}  // namespace crux::hostd
