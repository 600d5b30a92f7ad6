#include "crux/hostd/hostd_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <zmq.hpp>

#include "crux/hostd/host_agent.h"
#include "crux/hostd/local_socket.h"
#include "crux/hostd/nic_counters.h"
#include "crux/protocol/client.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/term_file.h"
#include "crux/protocol/transport_context.h"

namespace crux::hostd {
namespace {

core::Duration Now() {
  return core::Duration::Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class HostdServer::Impl {
 public:
  Impl(HostdConfig config, std::vector<std::unique_ptr<HostProbe>> probes)
      : config_(config), agent_(std::move(config), static_cast<uint64_t>(::getpid())) {
    for (auto& p : probes) agent_.AddProbe(std::move(p));
    agent_.SetNicCounterSource(std::make_unique<SysfsNicCounters>(config_.sysfs_root));
  }
  ~Impl() {
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }

  core::Status Init() {
    if (!config_.term_file.empty()) {
      // Fail closed: a term file that cannot be trusted stops crux-hostd (protocol/term_file.h)
      // with exit status 2, which systemd does not restart (RestartPreventExitStatus=2).
      core::Result<protocol::TermFile> file =
          protocol::TermFile::Open(config_.term_file, config_.host);
      if (!file.ok()) return core::InvalidArgumentError("term_file: " + file.status().message());
      agent_.SetTermFile(*std::move(file));
    }
    protocol::ClientOptions o;
    o.endpoint = config_.daemon_endpoint;
    if (!config_.insecure) {
      auto spub = protocol::LoadPublicKeyFile(config_.server_key_file);
      if (!spub.ok()) return spub.status().WithContext("server_key");
      auto keys = protocol::LoadSecretKeyFile(config_.client_key_file);
      if (!keys.ok()) return keys.status().WithContext("client_key");
      o.curve = true;
      o.server_public_z85 = *spub;
      o.client_keys = *keys;
    }
    auto dealer = protocol::DealerClient::Connect(ctx_, o);
    if (!dealer.ok()) return dealer.status().WithContext("daemon");
    dealer_ = std::move(*dealer);
    auto listener = LocalListener::Listen(config_.socket);
    if (!listener.ok()) return listener.status().WithContext("socket");
    listener_ = std::move(*listener);
    stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (stop_fd_ < 0) return core::InternalError("eventfd failed");
    return core::Status::Ok();
  }

  void Stop() {
    const uint64_t one = 1;
    if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
  }

  core::Status Run() {
    sd_notifyf(0, "READY=1\nSTATUS=serving %s for %s", config_.socket.c_str(),
               config_.host.c_str());
    uint64_t watchdog_us = 0;
    const bool watchdog = sd_watchdog_enabled(0, &watchdog_us) > 0;
    auto last_ping = std::chrono::steady_clock::now();
    for (;;) {
      std::vector<zmq_pollitem_t> items;
      items.push_back({dealer_->raw_socket(), 0, ZMQ_POLLIN, 0});
      items.push_back({nullptr, stop_fd_, ZMQ_POLLIN, 0});
      items.push_back({nullptr, listener_.fd(), ZMQ_POLLIN, 0});
      items.push_back({dealer_->raw_monitor_socket(), 0, ZMQ_POLLIN, 0});
      constexpr size_t kFirstConn = 4;  // Local connections follow the four items above.
      std::vector<ConnId> order;
      for (auto& [id, c] : conns_) {
        items.push_back({nullptr, c.fd(), ZMQ_POLLIN, 0});
        order.push_back(id);
      }
      const core::Duration now = Now();
      const core::Duration wake = agent_.NextWakeup();
      long timeout_ms = 200;
      if (!wake.IsInfinite()) {
        timeout_ms = std::clamp<long>(static_cast<long>((wake - now).ToMillis()) + 1, 0, 200);
      }
      if (zmq_poll(items.data(), static_cast<int>(items.size()), timeout_ms) < 0 &&
          zmq_errno() != EINTR) {
        return core::InternalError(std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
      }
      if (items[1].revents & ZMQ_POLLIN) break;
      // cruxd, then its connection: a lost or new one (an HA leader change) makes every job's
      // session speak at once (HostAgent::OnDaemonConnectionChange).
      for (;;) {
        auto m = dealer_->TryReceive();
        if (!m.ok() || !m->has_value()) break;
        agent_.OnDaemonMessage(**m, Now(), UnixNowNs());
      }
      FollowDaemon();
      // New ranks.
      if (items[2].revents & ZMQ_POLLIN) {
        for (;;) {
          auto c = listener_.Accept();
          if (!c.ok() || !c->has_value()) break;
          const ConnId id = ++next_conn_;
          agent_.OnLocalConnected(id, (*c)->peer().pid, (*c)->peer().uid, Now());
          conns_.emplace(id, std::move(**c));
        }
      }
      // Ranks' messages.
      for (size_t i = 0; i < order.size(); ++i) {
        if ((items[kFirstConn + i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) == 0) continue;
        auto it = conns_.find(order[i]);
        if (it == conns_.end()) continue;
        for (;;) {
          auto r = it->second.Receive();
          if (!r.ok()) {
            agent_.OnLocalClosed(it->first, Now());
            conns_.erase(it);
            break;
          }
          if (!r->has_value()) break;
          auto msg = Decode(**r);
          if (msg.ok()) {
            agent_.OnLocalMessage(it->first, *msg, Now());
          } else {
            agent_.OnLocalBadMessage(it->first, msg.status());
          }
        }
      }
      agent_.Tick(Now());
      Flush();
      FollowDaemon();  // A change the sends above read from the monitor (its signal is gone).
      if (watchdog && std::chrono::steady_clock::now() - last_ping >
                          std::chrono::microseconds(watchdog_us / 2)) {
        sd_notify(0, "WATCHDOG=1");
        last_ping = std::chrono::steady_clock::now();
      }
    }
    sd_notify(0, "STOPPING=1");
    return core::Status::Ok();
  }

 private:
  // Acts on a lost or new connection to cruxd (read from the monitor by any call) and sends
  // what the sessions queued for it.
  void FollowDaemon() {
    auto change = dealer_->TakeConnectionChange();
    if (!change.ok() || !(change->lost || change->connected)) return;
    agent_.OnDaemonConnectionChange(change->lost, change->connected, Now());
    Flush();
  }

  void Flush() {
    for (const v1::Envelope& e : agent_.TakeToDaemon()) {
      core::Status s = dealer_->Send(e);
      if (!s.ok()) agent_.OnDaemonSendFailed(e, s, Now());
    }
    for (const auto& [id, m] : agent_.TakeToLocal()) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      if (!it->second.Send(Encode(m)).ok() && !it->second.is_open()) {
        agent_.OnLocalClosed(id, Now());
        conns_.erase(it);
      }
    }
  }

  HostdConfig config_;
  HostAgent agent_;
  protocol::TransportContext ctx_;
  std::unique_ptr<protocol::DealerClient> dealer_;
  LocalListener listener_;
  std::map<ConnId, LocalConnection> conns_;
  ConnId next_conn_ = 0;
  int stop_fd_ = -1;
};

HostdServer::HostdServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostdServer::~HostdServer() = default;

core::Result<std::unique_ptr<HostdServer>> HostdServer::Create(
    HostdConfig config, std::vector<std::unique_ptr<HostProbe>> probes) {
  auto impl = std::make_unique<Impl>(std::move(config), std::move(probes));
  CRUX_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<HostdServer>(new HostdServer(std::move(impl)));
}

core::Status HostdServer::Run() { return impl_->Run(); }
void HostdServer::Stop() { impl_->Stop(); }

core::Result<std::string> QueryStatus(const std::string& socket, int timeout_ms) {
  CRUX_ASSIGN_OR_RETURN(LocalConnection c, LocalConnection::Connect(socket));
  CRUX_RETURN_IF_ERROR(c.Send(Encode(StatusRequest{})));
  pollfd p{c.fd(), POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto r = c.Receive();
    if (!r.ok()) return r.status();
    if (r->has_value()) {
      auto m = Decode(**r);
      if (!m.ok()) return m.status();
      if (const auto* s = std::get_if<StatusReply>(&*m)) return s->json;
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return core::UnavailableError("no status reply from " + socket);
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

}  // namespace crux::hostd
