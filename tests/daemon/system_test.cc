// In-process system tests: a whole cruxd (App: real core, SQLite, the real protocol library
// with its ROUTER endpoints on loopback TCP and ipc) driven by real DEALER clients. Covers the
// register -> profile -> assignment flow with increasing epochs, bad input of every message type
// (error reply + metric, and the next good message works), the admin endpoint, CURVE refusal of
// unauthorised clients, and the /metrics exposition checked by promtool.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "crux/daemon/app/app.h"
#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "daemon_test_util.h"
#include "http_get.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;
using namespace crux::daemon::testing;  // NOLINT(build/namespaces)
namespace fs = std::filesystem;

constexpr core::Duration kTimeout = core::Duration::Millis(3000);

using ::crux::test::HttpGet;

// Scrapes /metrics until it matches `pattern` (the transport counters are folded in by a 1 s
// refresh on the loop) or 5 s pass; returns the last scrape.
std::string ScrapeUntil(int port, const std::string& pattern) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = HttpGet(port, "/metrics");
    if (::testing::Value(text, ::testing::ContainsRegex(pattern))) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return text;
}

class SystemTest : public ::testing::Test {
 protected:
  void Start(const std::string& extra_config, bool curve = false) {
    dir_ = TempDir(std::string("sys_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::string yaml = "topology: embedded\nstate_dir: " + (dir_ / "state").string() +
                       "\nclient_endpoint: tcp://127.0.0.1:*\nmetrics_listen: 127.0.0.1:0\n"
                       "debounce_ms: 10\nlog_level: warn\n" +
                       extra_config;
    if (!curve) yaml += "insecure: true\n";
    const fs::path cfg = dir_ / "cruxd.yaml";
    std::ofstream(cfg) << yaml;
    AppOptions o;
    o.config_path = cfg.string();
    o.metrics_any_port = true;
    auto app = App::Create(o);
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    app_ = std::move(app).value();
    thread_ = std::thread([this] { app_->Run(); });
  }

  void TearDown() override {
    clients_.clear();
    if (app_) {
      app_->RequestStop();
      thread_.join();
      app_.reset();
    }
    fs::remove_all(dir_);
  }

  protocol::DealerClient& Connect(protocol::ClientOptions o = {}) {
    if (o.endpoint.empty()) o.endpoint = app_->client_endpoint();
    auto c = protocol::DealerClient::Connect(ctx_, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    clients_.push_back(std::move(c).value());
    return *clients_.back();
  }
  protocol::DealerClient& Admin() {
    protocol::ClientOptions o;
    o.endpoint = app_->admin_endpoint();
    return Connect(o);
  }

  // Waits for the next Assignment push with an epoch above `after`.
  v1::Assignment NextAssignment(protocol::DealerClient& c, uint64_t after) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto m = c.Receive(core::Duration::Millis(200));
      EXPECT_TRUE(m.ok());
      if (m.ok() && m->has_value() && (*m)->has_assignment() &&
          (*m)->assignment().epoch() > after) {
        return (*m)->assignment();
      }
    }
    ADD_FAILURE() << "no assignment after epoch " << after;
    return v1::Assignment();
  }

  fs::path dir_;
  protocol::TransportContext ctx_;
  std::unique_ptr<App> app_;
  std::thread thread_;
  std::vector<std::unique_ptr<protocol::DealerClient>> clients_;
};

TEST_F(SystemTest, ThreeJobsRegisterReportAndGetAssignmentsWithIncreasingEpochs) {
  Start("");
  const std::vector<std::pair<std::string, std::vector<std::string>>> jobs = {
      {"gpt", {"host0", "host4"}}, {"bert", {"host1", "host5"}}, {"moe", {"host2", "host6"}}};
  std::vector<protocol::DealerClient*> cs;
  std::vector<uint32_t> cs_dscp;
  for (const auto& [id, hosts] : jobs) {
    protocol::DealerClient& c = Connect();
    cs.push_back(&c);
    auto r = c.Call(Register(id, hosts), kTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_register_job_reply()) << r->DebugString();
    cs_dscp.push_back(r->register_job_reply().dscp());
    EXPECT_EQ(r->register_job_reply().job_id(), id);
    EXPECT_GT(r->register_job_reply().lease_ms(), 0u);
  }
  std::vector<uint64_t> first(3);
  for (size_t i = 0; i < 3; ++i) {
    v1::Assignment a = NextAssignment(*cs[i], 0);
    EXPECT_EQ(a.job_id(), jobs[i].first);
    EXPECT_EQ(a.level(), 0u);
    EXPECT_GT(a.flows_size(), 0);
    first[i] = a.epoch();
    v1::Envelope ack = protocol::NewEnvelope();
    ack.mutable_ack()->set_job_id(a.job_id());
    ack.mutable_ack()->set_epoch(a.epoch());
    ack.mutable_ack()->set_ok(true);
    auto r = cs[i]->Call(ack, kTimeout);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->has_ack()) << r->DebugString();
  }
  for (size_t i = 0; i < 3; ++i) {
    auto r = cs[i]->Call(Profile(jobs[i].first, 100 + 150 * i, 30, true), kTimeout);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->has_ack()) << r->DebugString();
  }
  for (size_t i = 0; i < 3; ++i) {
    v1::Assignment a = NextAssignment(*cs[i], first[i]);
    EXPECT_GT(a.epoch(), first[i]);
    EXPECT_EQ(a.state(), v1::JOB_STATE_SCHEDULED);
    EXPECT_GE(a.level(), 1u);
  }
  // A fake switch agent (where a switch adapter would be) gets the desired QoS state and
  // reports it applied.
  protocol::DealerClient& agent = Connect();
  v1::Envelope hello = protocol::NewEnvelope();
  hello.mutable_switch_hello()->set_switch_name("tor0");
  hello.mutable_switch_hello()->set_agent_version("fake-1");
  hello.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  hello.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
  hello.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
  auto hr = agent.Call(hello, kTimeout);
  ASSERT_TRUE(hr.ok());
  ASSERT_TRUE(hr->has_ack()) << hr->DebugString();
  v1::SwitchQosState desired;
  for (int i = 0; i < 50 && desired.switch_name().empty(); ++i) {
    auto m = agent.Receive(core::Duration::Millis(100));
    if (m.ok() && m->has_value() && (*m)->has_switch_state()) desired = (*m)->switch_state();
  }
  ASSERT_EQ(desired.switch_name(), "tor0");
  EXPECT_EQ(desired.dscp_to_tc_size(), 64);
  for (size_t i = 0; i < 3; ++i) {  // Each job's colour maps to a job TC (level_tcs 5..2).
    const uint32_t tc = desired.dscp_to_tc().at(cs_dscp[i]);
    EXPECT_TRUE(tc >= 2 && tc <= 5) << "dscp " << cs_dscp[i] << " -> " << tc;
  }
  v1::Envelope applied = protocol::NewEnvelope();
  applied.mutable_switch_applied()->set_switch_name("tor0");
  applied.mutable_switch_applied()->set_epoch(desired.epoch());
  applied.mutable_switch_applied()->set_ok(true);
  ASSERT_TRUE(agent.Call(applied, kTimeout)->has_ack());

  // The admin endpoint sees them.
  protocol::DealerClient& admin = Admin();
  v1::Envelope sw = protocol::NewEnvelope();
  sw.mutable_list_switches_request();
  auto switches = admin.Call(sw, kTimeout);
  ASSERT_TRUE(switches.ok());
  ASSERT_EQ(switches->list_switches_reply().switches_size(), 1);
  EXPECT_EQ(switches->list_switches_reply().switches(0).applied_epoch(), desired.epoch());
  v1::Envelope req = protocol::NewEnvelope();
  req.mutable_status_request();
  auto st = admin.Call(req, kTimeout);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_TRUE(st->has_status_reply()) << st->DebugString();
  EXPECT_EQ(st->status_reply().jobs(), 3u);
  EXPECT_EQ(st->status_reply().jobs_by_state().at("scheduled"), 3u);
  EXPECT_GE(st->status_reply().epoch(), 2u);
  // A second cruxd on the same state directory is refused before it touches anything.
  AppOptions second;
  second.config_path = (dir_ / "cruxd.yaml").string();
  auto twin = App::Create(second);
  ASSERT_FALSE(twin.ok());
  EXPECT_THAT(twin.status().message(), HasSubstr("another cruxd"));
  EXPECT_TRUE(admin.Call(req, kTimeout)->has_status_reply()) << "the first one is unaffected";
  // The admin socket is private.
  const std::string sock = app_->admin_endpoint().substr(6);
  EXPECT_EQ(fs::status(sock).permissions() & (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);
}

TEST_F(SystemTest, BadInputOfEveryKindGetsAnErrorAndTheNextGoodMessageWorks) {
  Start("");
  protocol::DealerClient& good = Connect();
  ASSERT_TRUE(good.Call(Register("ok", {"host0", "host4"}), kTimeout)->has_register_job_reply());

  // Raw frames: garbage, a wrong version, an oversize frame.
  zmq::socket_t raw(ctx_.context(), zmq::socket_type::dealer);
  raw.set(zmq::sockopt::rcvtimeo, 3000);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(app_->client_endpoint());
  auto raw_call = [&](const std::string& frame) {
    raw.send(zmq::buffer(frame), zmq::send_flags::none);
    zmq::message_t m;
    auto got = raw.recv(m);
    EXPECT_TRUE(got.has_value());
    auto env = protocol::Decode(std::string_view(static_cast<const char*>(m.data()), m.size()));
    EXPECT_TRUE(env.ok());
    return env.ok() ? env.value() : v1::Envelope();
  };
  EXPECT_EQ(raw_call("\xff\xfe garbage").error().code(), v1::ERROR_CODE_MALFORMED);
  v1::Envelope v2 = Heartbeat("ok", 0, 77);
  v2.set_protocol_version(2);
  v1::Envelope r2 = raw_call(v2.SerializeAsString());
  EXPECT_EQ(r2.error().code(), v1::ERROR_CODE_UNSUPPORTED_VERSION);
  v1::Envelope big = Register("big", {"host0", "host4"}, 1, 78);
  big.mutable_register_job()->set_model(std::string(protocol::kMaxFrameBytes + 10, 'x'));
  EXPECT_EQ(raw_call(big.SerializeAsString()).error().code(), v1::ERROR_CODE_TOO_LARGE);

  protocol::DealerClient& bad = Connect();
  // The misbehaving peer has a job of its own (a job speaks through the connection that
  // registered it, so it could not heartbeat "ok").
  ASSERT_TRUE(bad.Call(Register("own", {"host1", "host5"}), kTimeout)->has_register_job_reply());
  auto expect_error = [&](v1::Envelope msg, v1::ErrorCode code, const std::string& what) {
    auto r = bad.Call(msg, kTimeout);
    ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
    ASSERT_TRUE(r->has_error()) << what << ": " << r->DebugString();
    EXPECT_EQ(r->error().code(), code) << what << ": " << r->error().message();
    // The same peer keeps working.
    auto hb = bad.Call(Heartbeat("own", 0), kTimeout);
    ASSERT_TRUE(hb.ok());
    EXPECT_TRUE(hb->has_ack()) << what << " then heartbeat: " << hb->DebugString();
  };
  expect_error(Register("bad id!", {"host0"}), v1::ERROR_CODE_INVALID_ARGUMENT, "register id");
  expect_error(Register("x", {"host0", "host99"}), v1::ERROR_CODE_UNKNOWN_HOST, "register host");
  expect_error(Register("ok", {"host0", "host8"}), v1::ERROR_CODE_CONFLICT, "register conflict");
  v1::Envelope p = Profile("ok", 100, 1, false);
  p.mutable_profile_report()->set_compute_time_ns(0);
  expect_error(p, v1::ERROR_CODE_INVALID_ARGUMENT, "profile zero compute");
  p = Profile("ok", 100, 1, false);
  p.mutable_profile_report()->set_overlap_start(std::numeric_limits<double>::quiet_NaN());
  expect_error(p, v1::ERROR_CODE_INVALID_ARGUMENT, "profile NaN");
  expect_error(Profile("ghost", 100, 1, false), v1::ERROR_CODE_UNKNOWN_JOB, "profile unknown");
  expect_error(Heartbeat("ghost", 0), v1::ERROR_CODE_UNKNOWN_JOB, "heartbeat unknown");
  v1::Envelope end = protocol::NewEnvelope();
  end.mutable_end_job()->set_job_id("ghost");
  expect_error(end, v1::ERROR_CODE_UNKNOWN_JOB, "end unknown");
  v1::Envelope ack = protocol::NewEnvelope();
  ack.mutable_ack()->set_job_id("ghost");
  expect_error(ack, v1::ERROR_CODE_UNKNOWN_JOB, "ack unknown");
  v1::Envelope asg = protocol::NewEnvelope();
  asg.mutable_assignment()->set_job_id("ok");
  expect_error(asg, v1::ERROR_CODE_INVALID_ARGUMENT, "assignment from a client");
  v1::Envelope hello = protocol::NewEnvelope();
  hello.mutable_switch_hello()->set_switch_name("nosuchswitch");
  expect_error(hello, v1::ERROR_CODE_UNKNOWN_HOST, "hello unknown switch");
  v1::Envelope applied = protocol::NewEnvelope();
  applied.mutable_switch_applied()->set_switch_name("tor1");
  expect_error(applied, v1::ERROR_CODE_NOT_FOUND, "applied before hello");
  v1::Envelope state = protocol::NewEnvelope();
  state.mutable_switch_state()->set_switch_name("tor1");
  expect_error(state, v1::ERROR_CODE_INVALID_ARGUMENT, "switch state from an agent");
  v1::Envelope status = protocol::NewEnvelope();
  status.mutable_status_request();
  expect_error(status, v1::ERROR_CODE_INVALID_ARGUMENT, "admin request on the client endpoint");

  // Admin bad input.
  protocol::DealerClient& admin = Admin();
  v1::Envelope job = protocol::NewEnvelope();
  job.mutable_job_request()->set_job_id("ghost");
  EXPECT_EQ(admin.Call(job, kTimeout)->error().code(), v1::ERROR_CODE_NOT_FOUND);
  v1::Envelope link = protocol::NewEnvelope();
  link.mutable_set_link_request()->set_link("tor0->nowhere");
  link.mutable_set_link_request()->set_health(v1::LINK_HEALTH_DOWN);
  EXPECT_EQ(admin.Call(link, kTimeout)->error().code(), v1::ERROR_CODE_NOT_FOUND);
  EXPECT_EQ(admin.Call(Heartbeat("ok", 0), kTimeout)->error().code(),
            v1::ERROR_CODE_INVALID_ARGUMENT);
  v1::Envelope list = protocol::NewEnvelope();
  list.mutable_list_jobs_request();
  auto jobs = admin.Call(list, kTimeout);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->list_jobs_reply().jobs_size(), 2);  // Nothing bad got in.
  EXPECT_EQ(jobs->list_jobs_reply().jobs(0).job_id(), "ok");
  EXPECT_EQ(jobs->list_jobs_reply().jobs(1).job_id(), "own");

  // Metrics: every refusal counted by kind; the exposition passes promtool.
  const std::string text =
      ScrapeUntil(app_->metrics_port(), "crux_errors_total.endpoint=.client.,kind=.malformed.. 1");
  ASSERT_FALSE(text.empty());
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"malformed\"} 1"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"too_large\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unsupported_version\"} 1"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unknown_host\"} 2"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unknown_job\"} 4"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"conflict\"} 1"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"admin\",kind=\"not_found\"} 2"));
  EXPECT_THAT(text, HasSubstr("crux_replan_duration_seconds_bucket"));
  EXPECT_THAT(text, HasSubstr("crux_jobs{state=\"registered\"} 2"));
  const fs::path scrape = dir_ / "scrape.txt";
  std::ofstream(scrape) << text;
  if (fs::exists("/usr/bin/promtool")) {
    const std::string cmd = "/usr/bin/promtool check metrics < " + scrape.string() + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), pipe)) out += buf;
    const int rc = ::pclose(pipe);
    EXPECT_EQ(rc, 0) << out;
  } else {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  }
}

// Quiet requests (Envelope.quiet, issue #28): cruxd takes them as usual but answers only a
// refusal, in the order of the connection's requests, so the Ack of a later request confirms
// the quiet ones before it. A quiet request of a kind that needs its reply is refused.
TEST_F(SystemTest, QuietRequestsAreAnsweredOnlyWhenRefusedAndInOrder) {
  Start("");
  protocol::DealerClient& c = Connect();
  ASSERT_TRUE(c.Call(Register("q", {"host0", "host4"}), kTimeout)->has_register_job_reply());
  const uint64_t first = NextAssignment(c, 0).epoch();

  // A quiet converged report, a quiet report of a job nobody registered, a quiet heartbeat,
  // then a report that asks for its Ack.
  const uint64_t good = c.NextRequestId();
  v1::Envelope report = Profile("q", 200, 30, true, good);
  report.set_quiet(true);
  const uint64_t unknown = c.NextRequestId();
  v1::Envelope stray = Profile("nobody", 200, 30, true, unknown);
  stray.set_quiet(true);
  const uint64_t beat = c.NextRequestId();
  v1::Envelope heartbeat = Heartbeat("q", first, beat);
  heartbeat.set_quiet(true);
  const uint64_t last = c.NextRequestId();
  for (const v1::Envelope* m : {&report, &stray, &heartbeat}) ASSERT_TRUE(c.Send(*m).ok());
  ASSERT_TRUE(c.Send(Profile("q", 200, 30, true, last)).ok());

  std::vector<v1::Envelope> replies;
  std::vector<v1::Assignment> pushes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline &&
         (replies.empty() || replies.back().request_id() != last)) {
    auto m = c.Receive(core::Duration::Millis(200));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    if (!m->has_value()) continue;
    if ((*m)->request_id() != 0) {
      replies.push_back(**m);
    } else if ((*m)->has_assignment()) {
      pushes.push_back((*m)->assignment());
    }
  }
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].request_id(), unknown);
  ASSERT_TRUE(replies[0].has_error()) << replies[0].DebugString();
  EXPECT_EQ(replies[0].error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
  EXPECT_EQ(replies[1].request_id(), last);
  EXPECT_TRUE(replies[1].has_ack()) << replies[1].DebugString();

  // The quiet report was taken: the job is scheduled at a new epoch.
  v1::Assignment scheduled;
  for (const v1::Assignment& a : pushes) {
    if (a.epoch() > first) scheduled = a;
  }
  if (scheduled.epoch() == 0) scheduled = NextAssignment(c, first);
  EXPECT_GT(scheduled.epoch(), first);
  EXPECT_EQ(scheduled.state(), v1::JOB_STATE_SCHEDULED);

  // A registration's reply is its point: quiet is refused before anything changes.
  v1::Envelope quiet_register = Register("r", {"host1", "host5"});
  quiet_register.set_quiet(true);
  auto refused = c.Call(quiet_register, kTimeout);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  ASSERT_TRUE(refused->has_error()) << refused->DebugString();
  EXPECT_EQ(refused->error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(refused->error().message(), HasSubstr("envelope.quiet"));
  protocol::DealerClient& admin = Admin();
  v1::Envelope req = protocol::NewEnvelope();
  req.mutable_status_request();
  auto st = admin.Call(req, kTimeout);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->status_reply().jobs(), 1u);
}

// The crux_* series a shipped file refers to, as metric family names (a histogram's _bucket,
// _count and _sum are its family's).
std::set<std::string> ReferencedFamilies(const fs::path& file) {
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> out;
  const std::regex name("crux_[a-z0-9_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    std::string n = it->str();
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string s(suffix);
      if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) {
        n.resize(n.size() - s.size());
      }
    }
    out.insert(n);
  }
  return out;
}

TEST_F(SystemTest, EverySeriesTheDashboardAndAlertsUseExists) {
  Start("");
  const std::string text = ScrapeUntil(app_->metrics_port(), "crux_plan_epoch");
  ASSERT_FALSE(text.empty());
  const fs::path src(CRUX_SOURCE_DIR);
  for (const fs::path& file : {src / "packaging/prometheus/crux-rules.yml",
                               src / "packaging/grafana/crux-overview.json"}) {
    const std::set<std::string> names = ReferencedFamilies(file);
    EXPECT_GE(names.size(), 5u) << file;
    for (const std::string& n : names) {
      EXPECT_THAT(text, HasSubstr("# TYPE " + n + " ")) << n << " (used in " << file << ")";
    }
  }
}

TEST_F(SystemTest, CurveRefusesUnauthorisedClientsAndCountsThem) {
  const fs::path keys = TempDir("sys_curve_keys");
  auto server = protocol::GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto allowed = protocol::GenerateCurveKeyPair().value();
  auto stranger = protocol::GenerateCurveKeyPair().value();
  auto colleague = protocol::GenerateCurveKeyPair().value();
  fs::create_directories(keys / "clients");
  ASSERT_TRUE(protocol::SaveKeyPair(*server, (keys / "server").string()).ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(allowed.public_z85, (keys / "clients" / "job.pub").string()).ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(colleague.public_z85, (keys / "clients" / "colleague.pub").string())
          .ok());
  Start("curve: {enabled: true, server_secret_key_file: " + (keys / "server.key").string() +
            ", authorized_keys_dir: " + (keys / "clients").string() + "}\n",
        /*curve=*/true);

  protocol::ClientOptions o;
  o.curve = true;
  o.server_public_z85 = server->public_z85;
  o.client_keys = stranger;
  protocol::DealerClient& bad = Connect(o);
  auto refused = bad.Call(Register("intruder", {"host0", "host4"}), core::Duration::Millis(700));
  EXPECT_FALSE(refused.ok()) << "an unauthorised client must get no reply";

  o.client_keys = allowed;
  protocol::DealerClient& good = Connect(o);
  auto r = good.Call(Register("job", {"host0", "host4"}), kTimeout);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_register_job_reply()) << r->DebugString();
  // Another authorised key may not speak for a job it did not register.
  o.client_keys = colleague;
  protocol::DealerClient& other = Connect(o);
  auto denied = other.Call(Heartbeat("job", 0), kTimeout);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  ASSERT_TRUE(denied->has_error()) << denied->DebugString();
  EXPECT_EQ(denied->error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_TRUE(good.Call(Heartbeat("job", 0), kTimeout)->has_ack());

  const std::string text = ScrapeUntil(
      app_->metrics_port(), "crux_auth_refused_total\\{reason=\"unauthorised_key\"\\} [1-9]");
  EXPECT_THAT(text, ::testing::ContainsRegex(
                        "crux_auth_refused_total\\{reason=\"unauthorised_key\"\\} [1-9]"));
  EXPECT_THAT(text,
              ::testing::ContainsRegex("crux_auth_refused_total\\{reason=\"job_owner\"\\} [1-9]"));
  protocol::DealerClient& admin = Admin();
  v1::Envelope list = protocol::NewEnvelope();
  list.mutable_list_jobs_request();
  auto jobs = admin.Call(list, kTimeout);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->list_jobs_reply().jobs_size(), 1);
  EXPECT_EQ(jobs->list_jobs_reply().jobs(0).job_id(), "job");
  fs::remove_all(keys);
}

// Host keys over real CURVE (hosts/<host>.pub): only host3's agent may send host3's NIC
// counters; it may also register and keep alive a job; a job key, a switch key and another
// host's key are refused for host3's counters.
TEST_F(SystemTest, CurveHostKeysAloneSpeakForTheirHostsNicCounters) {
  const fs::path keys = TempDir("sys_curve_host_keys");
  auto server = protocol::GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto job = protocol::GenerateCurveKeyPair().value();
  auto host3 = protocol::GenerateCurveKeyPair().value();
  auto host5 = protocol::GenerateCurveKeyPair().value();
  auto tor1 = protocol::GenerateCurveKeyPair().value();
  fs::create_directories(keys / "clients" / "hosts");
  fs::create_directories(keys / "clients" / "switches");
  ASSERT_TRUE(protocol::SaveKeyPair(*server, (keys / "server").string()).ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(job.public_z85, (keys / "clients" / "job.pub").string()).ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(host3.public_z85, (keys / "clients" / "hosts" / "host3.pub").string())
          .ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(host5.public_z85, (keys / "clients" / "hosts" / "host5.pub").string())
          .ok());
  ASSERT_TRUE(protocol::SavePublicKey(tor1.public_z85,
                                      (keys / "clients" / "switches" / "tor1.pub").string())
                  .ok());
  Start("curve: {enabled: true, server_secret_key_file: " + (keys / "server.key").string() +
            ", authorized_keys_dir: " + (keys / "clients").string() + "}\n",
        /*curve=*/true);

  auto nic_report = [](const std::string& host) { return NicReport(host, 0); };
  auto connect = [&](const protocol::CurveKeyPair& k) -> protocol::DealerClient& {
    protocol::ClientOptions o;
    o.curve = true;
    o.server_public_z85 = server->public_z85;
    o.client_keys = k;
    return Connect(o);
  };
  auto denied = [&](protocol::DealerClient& c, const v1::Envelope& m, const std::string& want) {
    auto r = c.Call(m, kTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_error()) << r->DebugString();
    EXPECT_EQ(r->error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
    EXPECT_THAT(r->error().message(), HasSubstr(want));
  };
  denied(connect(job), nic_report("host3"), "this CURVE key is a job key");
  denied(connect(tor1), nic_report("host3"), "this CURVE key is a switch key");
  denied(connect(host5), nic_report("host3"), "may not speak for host 'host3'");

  protocol::DealerClient& agent = connect(host3);
  auto r = agent.Call(nic_report("host3"), kTimeout);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_ack()) << r->DebugString();
  r = agent.Call(Register("h3-job", {"host3"}), kTimeout);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_register_job_reply()) << r->DebugString();
  r = agent.Call(Heartbeat("h3-job", 0), kTimeout);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_ack()) << r->DebugString();

  const std::string text =
      ScrapeUntil(app_->metrics_port(), "crux_auth_refused_total\\{reason=\"role\"\\} 3");
  EXPECT_THAT(text, ::testing::ContainsRegex("crux_auth_refused_total\\{reason=\"role\"\\} 3"));
  fs::remove_all(keys);
}

}  // namespace
}  // namespace crux::daemon
