#include "crux/daemon/app/app.h"

#include <fcntl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "crux/daemon/app/daemon.h"
#include "crux/daemon/ha/leadership.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/store/store.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"
#include "crux/spec/topology_spec.h"

namespace crux::daemon {
namespace {

constexpr const char* kZapDomain = "crux";

void Notify(const std::string& state) { sd_notify(0, state.c_str()); }

core::Result<core::Topology> LoadTopology(const DaemonConfig& c, std::string* source) {
  if (c.topology == kEmbeddedTopology) {
    *source = "embedded:example_clos2";
    auto t = spec::ParseTopology(EmbeddedTopologyYaml(), "");
    if (!t.ok()) return t.status().WithContext("embedded topology");
    return t;
  }
  *source = std::filesystem::absolute(TopologyPath(c)).lexically_normal().string();
  auto t = spec::LoadTopologyFile(TopologyPath(c));
  if (!t.ok()) return t.status().WithContext("topology");
  return t;
}

std::string IpcPath(const std::string& endpoint) {
  return endpoint.rfind("ipc://", 0) == 0 ? endpoint.substr(6) : std::string();
}

// The config with the command-line overrides applied, validated.
core::Result<DaemonConfig> ResolveConfig(const AppOptions& options) {
  DaemonConfig c;
  if (options.config_path.empty()) {
    c = BuiltinDefaults();
  } else {
    CRUX_ASSIGN_OR_RETURN(c, LoadConfigFile(options.config_path));
  }
  if (!options.state_dir_override.empty()) c.state_dir = options.state_dir_override;
  if (!options.client_endpoint_override.empty()) {
    c.client_endpoint = options.client_endpoint_override;
  }
  if (!options.metrics_listen_override.empty()) c.metrics_listen = options.metrics_listen_override;
  CRUX_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

struct CurveSetup {
  protocol::CurveKeyPair server_keys;
  protocol::KeyGrants grants;
};

core::Result<CurveSetup> LoadCurve(const DaemonConfig& c) {
  CurveSetup out;
  auto keys = protocol::LoadSecretKeyFile(c.curve.server_secret_key_file);
  if (!keys.ok()) return keys.status().WithContext("curve.server_secret_key_file");
  out.server_keys = *keys;
  auto authorised = protocol::LoadAuthorizedKeys(c.curve.authorized_keys_dir);
  if (!authorised.ok()) return authorised.status().WithContext("curve.authorized_keys_dir");
  auto grants = protocol::GrantsOf(*authorised);
  if (!grants.ok()) return grants.status().WithContext("curve.authorized_keys_dir");
  out.grants = *std::move(grants);
  return out;
}

// The state directory exists (or can be created) and is writable by this process.
core::Status CheckStateDir(const std::string& dir, bool create) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    if (!create) {
      const auto parent = std::filesystem::absolute(dir, ec).parent_path();
      if (::access(parent.c_str(), W_OK | X_OK) != 0) {
        return core::UnavailableError("state_dir: " + dir + " does not exist and cannot be " +
                                      "created in " + parent.string() + ": " +
                                      std::strerror(errno));
      }
      return core::Status::Ok();
    }
    std::filesystem::create_directories(dir, ec);
    if (ec) return core::UnavailableError("state_dir: cannot create " + dir + ": " + ec.message());
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return core::UnavailableError("state_dir: " + dir + " is not a directory");
  }
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return core::UnavailableError("state_dir: " + dir + " is not writable by uid " +
                                  std::to_string(::geteuid()) + ": " + std::strerror(errno));
  }
  return core::Status::Ok();
}

}  // namespace

void ConfigureLogging(const std::string& level) {
  const bool tty = isatty(STDERR_FILENO) == 1;
  std::shared_ptr<spdlog::logger> logger;
  if (tty) {
    logger = spdlog::stderr_color_mt("cruxd");
  } else {
    logger = spdlog::stderr_logger_mt("cruxd");
  }
  if (std::getenv("JOURNAL_STREAM") != nullptr) {
    logger->set_pattern("%l: %v");  // journald adds time, unit and pid.
  } else {
    logger->set_pattern(tty ? "%Y-%m-%d %H:%M:%S.%e %^%l%$ %v" : "%Y-%m-%d %H:%M:%S.%e %l %v");
  }
  spdlog::set_default_logger(logger);
  auto lvl = spdlog::level::from_str(level);
  if (level == "off" || lvl != spdlog::level::off) spdlog::set_level(lvl);
}

struct App::Impl {
  ~Impl() {
    // The admin socket file is ours while we hold the lock: do not leave a stale one behind.
    if (!admin_socket_path.empty()) {
      std::error_code ec;
      std::filesystem::remove(admin_socket_path, ec);
    }
    if (lock_fd >= 0) ::close(lock_fd);  // Releases the state directory lock.
  }
  std::string admin_socket_path;
  AppOptions options;
  int lock_fd = -1;
  DaemonConfig config;
  std::unique_ptr<Store> store;
  AsioEventLoop loop;
  Metrics metrics;
  // Declaration order = reverse destruction order: the servers (whose threads call into the
  // daemon) go first, then the daemon, then the context they all use.
  std::unique_ptr<protocol::TransportContext> transport;
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<protocol::RouterServer> client_server;
  std::unique_ptr<protocol::RouterServer> admin_server;
  std::unique_ptr<boost::asio::signal_set> signals;
  core::Duration watchdog_every;
  int exit_code = 0;
  std::optional<CurveSetup> curve;
  std::optional<core::Topology> topology;  // Until the daemon takes it.
  std::string topo_source;
  StoreOpenOptions store_options;
  // High availability (config.ha enabled): the campaign; the daemon, its store and the client
  // endpoint exist only while this instance leads.
  std::unique_ptr<ha::Leadership> leadership;
  core::Duration started;

  core::Status StartDaemon();
  // High availability: this instance leads in `term`, on the shared state `shared`.
  core::Status Lead(int64_t term, std::unique_ptr<Store> shared);
  // High availability: the admin endpoint while no daemon serves (a standby).
  void HandleAdmin(const protocol::Inbound& in);
  // High availability: logs once every job the new leader restored is back - bound to a
  // connection and past an epoch of `term` (acknowledged; bound only in dry-run) - checking
  // every 50 ms from `since` (when it began serving) for at most 120 s; warns, naming a few,
  // when jobs are still missing after 10 s (`told`: already warned) and at 120 s. Loop thread.
  void WatchTakeover(uint64_t term, core::Duration since, bool told = false);

  void WaitSignal() {
    signals->async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        Reload();
        WaitSignal();
        return;
      }
      spdlog::info("signal {}: shutting down", sig);
      Notify("STOPPING=1");
      // HA: resign first (the fence closes, the lease is revoked): a standby leads at once.
      if (leadership) leadership->Resign();
      loop.Stop();
    });
  }

  void Reload() {
    Notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(loop.Now().nanos() / 1000));
    if (options.config_path.empty()) {
      spdlog::info("SIGHUP: running on built-in defaults, nothing to reload");
    } else {
      auto c = LoadConfigFile(options.config_path);
      if (!c.ok()) {
        spdlog::error("SIGHUP: config not reloaded, keeping the running one: {}",
                      c.status().ToString());
      } else {
        if (!options.state_dir_override.empty()) c->state_dir = options.state_dir_override;
        auto level = spdlog::level::from_str(c->log_level);
        if (c->log_level == "off" || level != spdlog::level::off) spdlog::set_level(level);
        if (daemon) {
          daemon->Reload(*c);
          config = daemon->config();
        } else {
          spdlog::info("SIGHUP: standby; the new config applies when this instance leads");
        }
      }
    }
    if (config.curve.enabled) {
      auto keys = protocol::LoadAuthorizedKeys(config.curve.authorized_keys_dir);
      auto grants =
          keys.ok() ? protocol::GrantsOf(*keys) : core::Result<protocol::KeyGrants>(keys.status());
      if (grants.ok()) {
        std::vector<std::string> z85;
        for (const auto& [key, grant] : *grants) z85.push_back(key);
        if (core::Status s = transport->SetAuthorizedKeys(kZapDomain, z85); s.ok() && daemon) {
          daemon->SetKeyGrants(*std::move(grants));
          spdlog::info("SIGHUP: {} authorised CURVE keys", z85.size());
        }
      } else {
        spdlog::error("SIGHUP: authorised keys not reloaded (the old ones stay): {}",
                      grants.status().ToString());
      }
    }
    Notify(daemon ? "READY=1\nSTATUS=serving " + std::to_string(daemon->tracker().jobs().size()) +
                        " jobs"
                  : std::string("READY=1\nSTATUS=standby"));
  }

  void Watchdog() {
    Notify("WATCHDOG=1");
    loop.RunAfter(watchdog_every, [this] { Watchdog(); });
  }
};

App::App(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

App::~App() {
  if (!impl_) return;
  impl_->leadership.reset();  // Joins the campaign thread: nothing more is posted to the loop.
  // Stop the transports before the daemon they deliver to.
  if (impl_->client_server) impl_->client_server->Stop();
  if (impl_->admin_server) impl_->admin_server->Stop();
  impl_->client_server.reset();
  impl_->admin_server.reset();
  impl_->daemon.reset();
  impl_->transport.reset();
}

core::Result<std::string> App::Check(const AppOptions& options) {
  CRUX_ASSIGN_OR_RETURN(DaemonConfig c, ResolveConfig(options));
  if (c.curve.enabled) CRUX_RETURN_IF_ERROR(LoadCurve(c).status());
  if (c.ha.enabled()) CRUX_RETURN_IF_ERROR(ha::CheckEtcdSettings(c.ha));
  std::string topo_source;
  CRUX_RETURN_IF_ERROR(LoadTopology(c, &topo_source).status());
  CRUX_RETURN_IF_ERROR(CheckStateDir(c.state_dir, /*create=*/false));
  if (!options.fresh_state) CRUX_RETURN_IF_ERROR(CheckSqliteStore(DatabasePath(c)));
  return EffectiveConfigYaml(c);
}

// ---- High availability (docs/daemon.md "High availability"; the campaign: ha/leadership.h) ----

core::Status App::Impl::Lead(int64_t term, std::unique_ptr<Store> shared) {
  store = std::move(shared);
  CRUX_RETURN_IF_ERROR(StartDaemon());
  daemon->SetTerm(static_cast<uint64_t>(term));
  metrics.SetLeader(true);
  protocol::RouterServer* as = admin_server.get();
  daemon->SetAdminSender([this, as](const std::string& peer, const v1::Envelope& e) {
    if (!e.has_status_reply()) return as->Send(peer, e);
    v1::Envelope with_ha = e;
    leadership->FillStatus(with_ha.mutable_status_reply()->mutable_ha());
    return as->Send(peer, with_ha);
  });
  daemon->AddTransportCounters("admin", [as] { return as->counters(); });
  daemon->Start();
  spdlog::info("ha: {} serving as leader, term {}: client endpoint {}, epoch {}",
               leadership->instance(), term, client_server->endpoint(), daemon->epoch());
  WatchTakeover(static_cast<uint64_t>(term), loop.Now());
  Notify("STATUS=leader (term " + std::to_string(term) + "), serving " +
         std::to_string(daemon->tracker().jobs().size()) + " jobs");
  return core::Status::Ok();
}

void App::Impl::WatchTakeover(uint64_t term, core::Duration since, bool told) {
  if (!daemon) return;
  const bool dry_run = daemon->config().dry_run;
  // "" when back, else why not.
  auto missing = [&](const std::string& peer, uint64_t acked_epoch) -> const char* {
    if (peer.empty()) return "not reconnected";
    return dry_run || (acked_epoch >> 32) >= term ? "" : "no acknowledgement of this term";
  };
  size_t jobs = 0;
  size_t waiting = 0;
  std::string examples;  // The first few jobs still missing, for the log.
  for (const auto& [id, j] : daemon->tracker().jobs()) {
    ++jobs;
    const char* why = j.parted() ? "" : missing(j.peer, j.acked_epoch);
    for (const auto& [host, p] : j.parts) {
      if (*why == '\0') why = missing(p.peer, p.acked_epoch);
    }
    if (*why == '\0') continue;
    if (++waiting <= 5) examples += (examples.empty() ? "" : ", ") + id + " (" + why + ")";
  }
  const int64_t ms = (loop.Now() - since).nanos() / 1'000'000;
  if (waiting == 0) {
    spdlog::info(
        "ha: takeover complete: all {} jobs reconnected and acknowledged term {} ({} ms after "
        "serving)",
        jobs, term, ms);
    return;
  }
  if (ms >= 120'000 || (!told && ms >= 10'000)) {
    spdlog::warn("ha: {} of {} jobs not back {} ms after serving (term {}), e.g. {}", waiting, jobs,
                 ms, term, examples);
    if (ms >= 120'000) return;
    told = true;
  }
  loop.RunAfter(core::Duration::Millis(50),
                [this, term, since, told] { WatchTakeover(term, since, told); });
}

void App::Impl::HandleAdmin(const protocol::Inbound& in) {
  if (daemon) return daemon->ProcessAdmin(in);
  (void)admin_server->Send(in.peer,
                           leadership->StandbyReply(in.msg, loop.Now() - started, topo_source));
}

// The daemon on `store` with the client endpoint bound and its senders wired (a single cruxd
// at start; an HA instance when it wins the election).
core::Status App::Impl::StartDaemon() {
  const DaemonConfig& c = config;
  CRUX_ASSIGN_OR_RETURN(daemon, Daemon::Create(c, std::move(*topology), topo_source, store.get(),
                                               &loop, &metrics, /*plan_in_background=*/true));
  topology.reset();
  spdlog::info("state id {:016x} (epoch {})", daemon->state_id(), daemon->epoch());
  if (curve) daemon->SetKeyGrants(curve->grants);
  daemon->SetStoreHealthListener([](const std::string& error) {
    Notify(error.empty() ? "STATUS=serving (store working again)"
                         : "STATUS=degraded: store failing (" + error.substr(0, 200) +
                               "); plans are not applied");
  });
  protocol::ServerOptions client_opts;
  client_opts.endpoint = c.client_endpoint;
  client_opts.zap_domain = kZapDomain;
  if (curve) {
    client_opts.curve = true;
    client_opts.server_keys = curve->server_keys;
    for (const auto& [key, grant] : curve->grants) client_opts.authorized_keys.push_back(key);
  }
  Daemon* d = daemon.get();
  auto client = protocol::RouterServer::StartBatched(
      *transport, client_opts,
      [d](std::vector<protocol::Inbound> batch) { d->OnClientBatch(std::move(batch)); });
  if (!client.ok()) return client.status().WithContext("client_endpoint");
  client_server = std::move(client).value();
  protocol::RouterServer* cs = client_server.get();
  // HA fencing: nothing leaves the client endpoint (pushes to jobs and switch agents, replies)
  // once this instance may no longer act as the leader (LeaderElection::MayAct).
  const ha::Leadership* el = leadership.get();
  d->SetClientSender([cs, el](const std::string& peer, const v1::Envelope& m) {
    if (el != nullptr && !el->MayAct()) return core::UnavailableError("ha: fenced (not leading)");
    return cs->Send(peer, m);
  });
  d->SetClientEncodedSender([cs, el](const std::string& peer, std::string frame) {
    if (el != nullptr && !el->MayAct()) return core::UnavailableError("ha: fenced (not leading)");
    return cs->SendEncoded(peer, std::move(frame));
  });
  d->AddTransportCounters("client", [cs] { return cs->counters(); });
  return core::Status::Ok();
}

core::Result<std::unique_ptr<App>> App::Create(const AppOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->started = impl->loop.Now();
  CRUX_ASSIGN_OR_RETURN(impl->config, ResolveConfig(options));
  DaemonConfig& c = impl->config;
  auto level = spdlog::level::from_str(c.log_level);
  if (c.log_level == "off" || level != spdlog::level::off) spdlog::set_level(level);
  spdlog::info("cruxd {} starting ({}); effective config:\n{}", kCruxdVersion, options.allocator,
               EffectiveConfigYaml(c));
  if (!c.curve.enabled) {
    spdlog::warn(
        "CURVE is disabled (insecure: true): anyone who can reach {} can register jobs; "
        "use this for labs only",
        c.client_endpoint);
  }

  // Key files first: a bad key must not cost a database open.
  if (c.curve.enabled) {
    CRUX_ASSIGN_OR_RETURN(impl->curve, LoadCurve(c));
  }

  // State directory (0700) and database.
  std::error_code ec;
  CRUX_RETURN_IF_ERROR(CheckStateDir(c.state_dir, /*create=*/true));
  ::chmod(c.state_dir.c_str(), 0700);
  // One cruxd per state directory: a second one would share the database and steal the admin
  // socket. The lock dies with the process (kill -9 included).
  const std::string lock_path = (std::filesystem::path(c.state_dir) / "cruxd.lock").string();
  impl->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (impl->lock_fd < 0) {
    return core::UnavailableError("state_dir: cannot open the lock file " + lock_path + ": " +
                                  std::strerror(errno));
  }
  if (::flock(impl->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return core::UnavailableError("state_dir: another cruxd is running on " + c.state_dir + " (" +
                                    lock_path + " is locked)");
    }
    return core::UnavailableError("state_dir: cannot lock " + lock_path + ": " +
                                  std::strerror(err));
  }
  impl->store_options.fresh = options.fresh_state;
  if (options.fresh_state) {
    spdlog::warn("--fresh-state: starting with empty state; an existing {} is moved aside",
                 DatabasePath(c));
  }
  CRUX_ASSIGN_OR_RETURN(core::Topology topo, LoadTopology(c, &impl->topo_source));
  spdlog::info("topology {}: {} hosts, {} nodes, {} directed links", impl->topo_source,
               topo.hosts().size(), topo.num_nodes(), topo.num_links());
  impl->topology = std::move(topo);

  impl->transport = std::make_unique<protocol::TransportContext>();
  if (!c.ha.enabled()) {
    CRUX_ASSIGN_OR_RETURN(impl->store, OpenSqliteStore(DatabasePath(c), impl->store_options));
    CRUX_RETURN_IF_ERROR(impl->StartDaemon());
    impl->metrics.SetLeader(true);  // Alone: it leads.
  } else {
    // A standby opens its state file only when it wins; check its health now (fail fast).
    if (!options.fresh_state) CRUX_RETURN_IF_ERROR(CheckSqliteStore(DatabasePath(c)));
    Impl* m = impl.get();
    impl->leadership =
        std::make_unique<ha::Leadership>(c, impl->store_options, &impl->loop, &impl->metrics,
                                         [m](int64_t term, std::unique_ptr<Store> shared) {
                                           return m->Lead(term, std::move(shared));
                                         });
  }

  const std::string admin_ep = AdminEndpoint(c);
  const std::string admin_path = IpcPath(admin_ep);
  if (!admin_path.empty()) {
    const auto dir = std::filesystem::path(admin_path).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    std::filesystem::remove(admin_path, ec);  // A stale socket of a killed cruxd.
  }
  protocol::ServerOptions admin_opts;
  admin_opts.endpoint = admin_ep;
  const mode_t old_mask = ::umask(0077);  // The socket file is born 0600.
  Impl* m = impl.get();
  Daemon* d = impl->daemon.get();
  auto admin =
      protocol::RouterServer::Start(*impl->transport, admin_opts, [d, m](protocol::Inbound in) {
        if (d != nullptr) return d->OnAdminInbound(std::move(in));
        // HA: a standby answers itself; a leader's daemon appears later, on the loop.
        auto shared = std::make_shared<protocol::Inbound>(std::move(in));
        m->loop.Post([m, shared] { m->HandleAdmin(*shared); });
      });
  ::umask(old_mask);
  if (!admin.ok()) return admin.status().WithContext("admin_endpoint");
  impl->admin_server = std::move(admin).value();
  if (!admin_path.empty()) {
    ::chmod(admin_path.c_str(), 0600);
    impl->admin_socket_path = admin_path;
  }
  protocol::RouterServer* as = impl->admin_server.get();
  if (d != nullptr) {
    d->SetAdminSender(
        [as](const std::string& peer, const v1::Envelope& e) { return as->Send(peer, e); });
    d->AddTransportCounters("admin", [as] { return as->counters(); });
  }

  // Metrics exporter (port 0 = off).
  std::string listen = c.metrics_listen;
  if (options.metrics_any_port) listen = listen.substr(0, listen.rfind(':')) + ":0";
  if (options.metrics_any_port || listen.substr(listen.rfind(':') + 1) != "0") {
    CRUX_RETURN_IF_ERROR(impl->metrics.StartExposer(listen));
    spdlog::info("metrics on http://{}/metrics", listen);
  }

  if (c.ha.enabled()) {
    CRUX_RETURN_IF_ERROR(impl->leadership->Campaign(as->endpoint()));
    spdlog::info(
        "high availability: instance {} campaigning on etcd {} (election {}); admin "
        "endpoint {}; the client endpoint {} is bound once this instance leads",
        impl->leadership->instance(), c.ha.etcd_endpoints, c.ha.election, as->endpoint(),
        c.client_endpoint);
  } else {
    spdlog::info("client endpoint {} (curve {}), admin endpoint {}",
                 impl->client_server->endpoint(), c.curve.enabled ? "on" : "off", as->endpoint());
  }
  return std::unique_ptr<App>(new App(std::move(impl)));
}

int App::Run() {
  Impl& m = *impl_;
  auto* io = static_cast<boost::asio::io_context*>(m.loop.io_context());
  m.signals = std::make_unique<boost::asio::signal_set>(*io, SIGTERM, SIGINT, SIGHUP);
  m.WaitSignal();
  if (m.daemon) m.daemon->Start();
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    m.watchdog_every = core::Duration::Micros(static_cast<int64_t>(usec / 2));
    spdlog::info("systemd watchdog: pinging every {} ms", usec / 2000);
    m.Watchdog();
  }
  if (m.daemon) {
    Notify("READY=1\nSTATUS=serving " + std::to_string(m.daemon->tracker().jobs().size()) +
           " jobs");
  } else {
    Notify("READY=1\nSTATUS=standby (campaigning on etcd)");
  }
  spdlog::info("cruxd ready");
  m.loop.Run();
  spdlog::info("cruxd stopped");
  return m.exit_code;
}

void App::RequestStop() {
  impl_->loop.Post([this] { impl_->loop.Stop(); });
}

const DaemonConfig& App::config() const { return impl_->config; }
std::string App::client_endpoint() const {
  return impl_->client_server ? impl_->client_server->endpoint() : std::string();
}
std::string App::admin_endpoint() const { return impl_->admin_server->endpoint(); }
int App::metrics_port() const { return impl_->metrics.port(); }

}  // namespace crux::daemon
