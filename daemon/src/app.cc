#include "crux/daemon/app.h"

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
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "crux/daemon/daemon.h"
#include "crux/daemon/event_loop.h"
#include "crux/daemon/metrics.h"
#include "crux/daemon/store.h"
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
    if (lock_fd >= 0) ::close(lock_fd);  // Releases the state directory lock.
  }
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
        daemon->Reload(*c);
        config = daemon->config();
      }
    }
    if (config.curve.enabled) {
      auto keys = protocol::LoadAuthorizedKeys(config.curve.authorized_keys_dir);
      if (keys.ok()) {
        std::vector<std::string> z85;
        for (const auto& k : *keys) z85.push_back(k.public_z85);
        if (core::Status s = transport->SetAuthorizedKeys(kZapDomain, z85); s.ok()) {
          spdlog::info("SIGHUP: {} authorised CURVE keys", z85.size());
        }
      } else {
        spdlog::error("SIGHUP: authorised keys not reloaded: {}", keys.status().ToString());
      }
    }
    Notify("READY=1\nSTATUS=serving " + std::to_string(daemon->tracker().jobs().size()) + " jobs");
  }

  void Watchdog() {
    Notify("WATCHDOG=1");
    loop.RunAfter(watchdog_every, [this] { Watchdog(); });
  }
};

App::App(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

App::~App() {
  if (!impl_) return;
  // Stop the transports before the daemon they deliver to.
  if (impl_->client_server) impl_->client_server->Stop();
  if (impl_->admin_server) impl_->admin_server->Stop();
  impl_->client_server.reset();
  impl_->admin_server.reset();
  impl_->daemon.reset();
  impl_->transport.reset();
}

core::Result<std::unique_ptr<App>> App::Create(const AppOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.config_path.empty()) {
    impl->config = BuiltinDefaults();
  } else {
    CRUX_ASSIGN_OR_RETURN(impl->config, LoadConfigFile(options.config_path));
  }
  DaemonConfig& c = impl->config;
  if (!options.state_dir_override.empty()) c.state_dir = options.state_dir_override;
  if (!options.client_endpoint_override.empty()) {
    c.client_endpoint = options.client_endpoint_override;
  }
  if (!options.metrics_listen_override.empty()) c.metrics_listen = options.metrics_listen_override;
  CRUX_RETURN_IF_ERROR(ValidateConfig(c));
  auto level = spdlog::level::from_str(c.log_level);
  if (c.log_level == "off" || level != spdlog::level::off) spdlog::set_level(level);
  spdlog::info("cruxd {} starting; effective config:\n{}", kCruxdVersion, EffectiveConfigYaml(c));
  if (!c.curve.enabled) {
    spdlog::warn(
        "CURVE is disabled (insecure: true): anyone who can reach {} can register jobs; "
        "use this for labs only",
        c.client_endpoint);
  }

  // State directory (0700) and database.
  std::error_code ec;
  std::filesystem::create_directories(c.state_dir, ec);
  if (ec) {
    return core::UnavailableError("state_dir: cannot create " + c.state_dir + ": " + ec.message());
  }
  ::chmod(c.state_dir.c_str(), 0700);
  // One cruxd per state directory: a second one would share the database and steal the admin
  // socket. The lock dies with the process (kill -9 included).
  const std::string lock_path = (std::filesystem::path(c.state_dir) / "cruxd.lock").string();
  impl->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (impl->lock_fd < 0 || ::flock(impl->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return core::UnavailableError("state_dir: another cruxd is running on " + c.state_dir + " (" +
                                  lock_path + " is locked)");
  }
  CRUX_ASSIGN_OR_RETURN(impl->store, OpenSqliteStore(DatabasePath(c)));

  std::string topo_source;
  CRUX_ASSIGN_OR_RETURN(core::Topology topo, LoadTopology(c, &topo_source));
  spdlog::info("topology {}: {} hosts, {} nodes, {} directed links", topo_source,
               topo.hosts().size(), topo.num_nodes(), topo.num_links());

  CRUX_ASSIGN_OR_RETURN(
      impl->daemon, Daemon::Create(c, std::move(topo), topo_source, impl->store.get(), &impl->loop,
                                   &impl->metrics, /*plan_in_background=*/true));

  // Transports.
  impl->transport = std::make_unique<protocol::TransportContext>();
  protocol::ServerOptions client_opts;
  client_opts.endpoint = c.client_endpoint;
  client_opts.zap_domain = kZapDomain;
  if (c.curve.enabled) {
    client_opts.curve = true;
    auto keys = protocol::LoadSecretKeyFile(c.curve.server_secret_key_file);
    if (!keys.ok()) return keys.status().WithContext("curve.server_secret_key_file");
    client_opts.server_keys = *keys;
    client_opts.authorized_keys_dir = c.curve.authorized_keys_dir;
  }
  Daemon* d = impl->daemon.get();
  auto client = protocol::RouterServer::Start(
      *impl->transport, client_opts,
      [d](protocol::Inbound in) { d->OnClientInbound(std::move(in)); });
  if (!client.ok()) return client.status().WithContext("client_endpoint");
  impl->client_server = std::move(client).value();

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
  auto admin = protocol::RouterServer::Start(
      *impl->transport, admin_opts,
      [d](protocol::Inbound in) { d->OnAdminInbound(std::move(in)); });
  ::umask(old_mask);
  if (!admin.ok()) return admin.status().WithContext("admin_endpoint");
  impl->admin_server = std::move(admin).value();
  if (!admin_path.empty()) ::chmod(admin_path.c_str(), 0600);

  protocol::RouterServer* cs = impl->client_server.get();
  protocol::RouterServer* as = impl->admin_server.get();
  d->SetClientSender(
      [cs](const std::string& peer, const v1::Envelope& m) { return cs->Send(peer, m); });
  d->SetAdminSender(
      [as](const std::string& peer, const v1::Envelope& m) { return as->Send(peer, m); });
  d->AddTransportCounters("client", [cs] { return cs->counters(); });
  d->AddTransportCounters("admin", [as] { return as->counters(); });

  // Metrics exporter (port 0 = off).
  std::string listen = c.metrics_listen;
  if (options.metrics_any_port) listen = listen.substr(0, listen.rfind(':')) + ":0";
  if (options.metrics_any_port || listen.substr(listen.rfind(':') + 1) != "0") {
    CRUX_RETURN_IF_ERROR(impl->metrics.StartExposer(listen));
    spdlog::info("metrics on http://{}/metrics", listen);
  }
  spdlog::info("client endpoint {} (curve {}), admin endpoint {}", cs->endpoint(),
               c.curve.enabled ? "on" : "off", as->endpoint());
  return std::unique_ptr<App>(new App(std::move(impl)));
}

int App::Run() {
  Impl& m = *impl_;
  auto* io = static_cast<boost::asio::io_context*>(m.loop.io_context());
  m.signals = std::make_unique<boost::asio::signal_set>(*io, SIGTERM, SIGINT, SIGHUP);
  m.WaitSignal();
  m.daemon->Start();
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    m.watchdog_every = core::Duration::Micros(static_cast<int64_t>(usec / 2));
    spdlog::info("systemd watchdog: pinging every {} ms", usec / 2000);
    m.Watchdog();
  }
  Notify("READY=1\nSTATUS=serving " + std::to_string(m.daemon->tracker().jobs().size()) + " jobs");
  spdlog::info("cruxd ready");
  m.loop.Run();
  spdlog::info("cruxd stopped");
  return m.exit_code;
}

void App::RequestStop() {
  impl_->loop.Post([this] { impl_->loop.Stop(); });
}

const DaemonConfig& App::config() const { return impl_->config; }
std::string App::client_endpoint() const { return impl_->client_server->endpoint(); }
std::string App::admin_endpoint() const { return impl_->admin_server->endpoint(); }
int App::metrics_port() const { return impl_->metrics.port(); }

}  // namespace crux::daemon
