#include "crux/daemon/ha/leadership.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "crux/core/base/ids.h"
#include "crux/daemon/ha/etcd_gateway.h"
#include "crux/daemon/ha/shared_store.h"
#include "crux/protocol/codec.h"
#include "crux/textio/file.h"

namespace crux::daemon::ha {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "cruxd";
  return buf;
}

std::string Prefix(const HaConfig& h) { return "/crux/" + h.election; }

// The password in ha.etcd_auth.password_file: its first line, from a file only its owner may
// read (like the CURVE secret key file).
core::Result<std::string> ReadPassword(const std::string& path) {
  const std::string what = "ha.etcd_auth.password_file " + core::QuoteName(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return core::InvalidArgumentError(what + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return core::InvalidArgumentError(what + ": mode " + mode +
                                      " lets others read the password (chmod 600 it)");
  }
  auto text = textio::ReadTextFile(path);
  if (!text.ok()) return text.status().WithContext("ha.etcd_auth.password_file");
  std::string password = text->substr(0, text->find_first_of("\r\n"));
  if (password.empty())
    return core::InvalidArgumentError(what + ": empty (one line: the password)");
  return password;
}

// The gateway options of `h`, with `timeout` per request.
core::Result<GatewayOptions> Gateway(const HaConfig& h, core::Duration timeout) {
  GatewayOptions gw;
  gw.endpoints = SplitEndpointList(h.etcd_endpoints);
  gw.timeout = timeout;
  gw.ca_file = h.etcd_tls.ca_file;
  gw.cert_file = h.etcd_tls.cert_file;
  gw.key_file = h.etcd_tls.key_file;
  gw.user = h.etcd_auth.user;
  if (!h.etcd_auth.password_file.empty()) {
    CRUX_ASSIGN_OR_RETURN(gw.password, ReadPassword(h.etcd_auth.password_file));
  }
  return gw;
}

}  // namespace

core::Status CheckEtcdSettings(const HaConfig& ha) {
  CRUX_ASSIGN_OR_RETURN(GatewayOptions gw, Gateway(ha, core::Duration::Millis(1000)));
  return ConnectGateway(gw).status();
}

Leadership::Leadership(const DaemonConfig& config, StoreOpenOptions store_options, EventLoop* loop,
                       Metrics* metrics, LeadCallback on_lead)
    : config_(config),
      store_options_(store_options),
      loop_(loop),
      metrics_(metrics),
      on_lead_(std::move(on_lead)),
      instance_(config.ha.instance.empty() ? HostName() : config.ha.instance) {
  if (metrics_ != nullptr) metrics_->EnableHa();
}

void Leadership::ExportView(const ElectionView& v) {
  if (metrics_ == nullptr) return;
  metrics_->SetHaRole(RoleName(v.role));
  metrics_->SetHaTerm(static_cast<uint64_t>(v.term));
  metrics_->AddHaLeaderChanges(v.leader_changes - exported_.leader_changes);
  for (const auto& [op, n] : v.etcd_errors) {
    metrics_->AddHaEtcdErrors(op, n - exported_.etcd_errors[op]);
  }
  for (const auto& [reason, n] : v.fence_closes) {
    metrics_->AddHaFenceCloses(reason, n - exported_.fence_closes[reason]);
  }
  exported_ = v;
}

Leadership::~Leadership() { election_.reset(); }

core::Status Leadership::Campaign(const std::string& admin_endpoint) {
  const HaConfig& h = config_.ha;
  const core::Duration ttl = core::Duration::Millis(h.lease_ttl_s * 1000);
  // A dead member costs < TTL/3 in all.
  CRUX_ASSIGN_OR_RETURN(GatewayOptions gw, Gateway(h, core::Duration::Nanos(ttl.nanos() / 6)));
  CRUX_ASSIGN_OR_RETURN(std::unique_ptr<Etcd> etcd, ConnectGateway(gw));
  ElectionOptions eo;
  eo.prefix = Prefix(h);
  eo.instance = instance_;
  eo.client_endpoint =
      h.advertise_endpoint.empty() ? config_.client_endpoint : h.advertise_endpoint;
  eo.admin_endpoint = admin_endpoint;
  eo.ttl = ttl;
  eo.poll = core::Duration::Nanos(std::min<int64_t>(ttl.nanos() / 15, 200'000'000));
  eo.on_view = [this](const ElectionView& v) { ExportView(v); };
  election_ = std::make_unique<LeaderElection>(
      eo, std::move(etcd), [this](int64_t term) { loop_->Post([this, term] { Elected(term); }); },
      [this](const std::string& why) {
        // On the campaign thread: the fence is already closed (MayAct() is false), so nothing
        // more leaves the client endpoint; leave at once, like a kill -9 (which cruxd survives):
        // no store write or push of this process can follow.
        spdlog::error(
            "ha: {} is deposed ({}); exiting with code {} so that it restarts as a "
            "standby",
            instance_, why, kExitDeposed);
        spdlog::default_logger()->flush();
        sd_notify(0, ("STOPPING=1\nSTATUS=deposed: " + why).c_str());
        ::_exit(kExitDeposed);
      });
  return core::Status::Ok();
}

void Leadership::Elected(int64_t term) {
  if (elected_) return;
  elected_ = true;
  spdlog::info("ha: {} is the leader (term {}); loading the shared state", instance_, term);
  auto local = OpenSqliteStore(DatabasePath(config_), store_options_);
  if (!local.ok()) Abdicate(local.status());
  auto gw = Gateway(config_.ha, core::Duration::Millis(config_.ha.lease_ttl_s * 1000 / 3));
  if (!gw.ok()) Abdicate(gw.status());
  auto etcd = ConnectGateway(*gw);
  if (!etcd.ok()) Abdicate(etcd.status());
  SharedStoreOptions so;
  so.prefix = Prefix(config_.ha);
  so.election_key = election_->key();
  so.term = term;
  if (metrics_ != nullptr) {
    Metrics* m = metrics_;
    so.on_etcd_error = [m](const core::Status&) { m->AddHaEtcdErrors("state", 1); };
    so.on_fenced = [m] { m->AddHaFenceCloses("store_guard", 1); };
  }
  auto shared = SharedStore::Open(std::move(local).value(), std::move(etcd).value(), std::move(so));
  if (!shared.ok()) Abdicate(shared.status());
  if (core::Status s = on_lead_(term, std::move(shared).value()); !s.ok()) Abdicate(s);
}

void Leadership::Abdicate(const core::Status& why) {
  spdlog::error("ha: {} won the election but cannot serve: {}; resigning and exiting", instance_,
                why.ToString());
  spdlog::default_logger()->flush();
  Resign();
  ::_exit(kExitDeposed);
}

bool Leadership::MayAct() const { return election_ && election_->MayAct(); }

void Leadership::Resign() {
  if (election_) election_->Resign();
}

void Leadership::FillStatus(v1::HaStatus* out) const {
  if (!election_) return;
  const ElectionView v = election_->view();
  out->set_instance(instance_);
  out->set_role(RoleName(v.role));
  out->set_term(static_cast<uint64_t>(v.term));
  out->set_leader(v.leader);
  out->set_leader_endpoint(v.leader_client_endpoint);
  out->set_etcd_error(v.last_error);
  out->set_lease_ttl_s(static_cast<uint32_t>(config_.ha.lease_ttl_s));
  for (const Member& mb : v.members) {
    v1::HaMember* m = out->add_members();
    m->set_instance(mb.instance);
    m->set_client_endpoint(mb.client_endpoint);
    m->set_admin_endpoint(mb.admin_endpoint);
    m->set_revision(static_cast<uint64_t>(mb.create_revision));
    m->set_role(mb.leader ? "leader" : "standby");
  }
}

v1::Envelope Leadership::StandbyReply(const v1::Envelope& request, core::Duration uptime,
                                      const std::string& topology) const {
  const uint64_t rid = request.request_id();
  if (request.has_status_request()) {
    v1::Envelope e = protocol::NewEnvelope(rid);
    v1::StatusReply* s = e.mutable_status_reply();
    s->set_version(kCruxdVersion);
    s->set_uptime_ms(static_cast<uint64_t>(uptime.nanos() / 1000000));
    s->set_topology(topology);
    s->set_state_path(DatabasePath(config_));
    s->set_store_ok(true);
    s->set_dry_run(config_.dry_run);
    s->set_levels(static_cast<uint32_t>(config_.planner.levels));
    FillStatus(s->mutable_ha());
    return e;
  }
  const ElectionView v = election_ ? election_->view() : ElectionView{};
  std::string where = v.leader.empty() ? "no leader is known yet"
                                       : "the leader is " + v.leader + " (client endpoint " +
                                             v.leader_client_endpoint + ")";
  for (const Member& mb : v.members) {
    if (mb.leader && !mb.admin_endpoint.empty()) where += ", admin endpoint " + mb.admin_endpoint;
  }
  return protocol::MakeError(rid, v1::ERROR_CODE_UNAVAILABLE,
                             "this cruxd (" + instance_ + ") is a standby; " + where);
}

}  // namespace crux::daemon::ha
