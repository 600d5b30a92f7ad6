#include "crux/hostd/path_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "crux/hostd/host_protocol.h"

namespace crux::hostd {
namespace {

uint64_t SteadyNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void PutBe(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetBe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[at + i]);
  return v;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const { return ss.ss_family; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
};

bool IsV4Mapped(const Gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g[i] != 0) return false;
  }
  return g[10] == 0xff && g[11] == 0xff;
}

SockAddr ToSockAddr(const Gid& g, uint16_t port) {
  SockAddr a;
  if (IsV4Mapped(g)) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, g.data() + 12, 4);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, g.data(), 16);
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

SockAddr Wildcard(int family, uint16_t port) {
  SockAddr a;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    in6->sin6_addr = in6addr_any;
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

// "a.b.c.d:port" (also for IPv4-mapped IPv6 peers of a dual-stack socket) or "[v6]:port".
std::string FormatSockAddr(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    Gid g;
    std::memcpy(g.data(), &in6->sin6_addr, 16);
    if (IsV4Mapped(g)) {
      inet_ntop(AF_INET, g.data() + 12, buf, sizeof buf);
      return std::string(buf) + ":" + std::to_string(ntohs(in6->sin6_port));
    }
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

std::string FormatHost(const SockAddr& a) {
  std::string s = FormatSockAddr(a.sa());
  return s.substr(0, s.rfind(':'));
}

// A non-blocking UDP socket of `local`'s family bound to it (IPv6: v6only unless `dual_stack`).
core::Result<int> BoundSocket(const SockAddr& local, bool dual_stack) {
  const int fd = ::socket(local.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return core::UnavailableError(Errno("socket"));
  if (local.family() == AF_INET6) {
    const int v6only = dual_stack ? 0 : 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  }
  if (::bind(fd, local.sa(), local.len) != 0) {
    const std::string e = Errno("bind " + FormatSockAddr(local.sa()));
    ::close(fd);
    return core::UnavailableError(e);
  }
  return fd;
}

uint16_t LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::string FormatUs(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

std::atomic<uint64_t> g_next_sequence{SteadyNs() << 16};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Header.

std::string EncodeProbeHeader(const ProbeHeader& h) {
  std::string out;
  out.reserve(kProbeHeaderBytes);
  PutBe(out, kProbeMagic, 4);
  PutBe(out, kProbeVersion, 1);
  PutBe(out, h.kind, 1);
  PutBe(out, 0, 2);
  PutBe(out, h.sequence, 8);
  PutBe(out, h.send_ns, 8);
  return out;
}

core::Result<ProbeHeader> DecodeProbeHeader(std::string_view b) {
  if (b.size() != kProbeHeaderBytes) {
    return core::InvalidArgumentError("probe: " + std::to_string(b.size()) + " bytes, want " +
                                      std::to_string(kProbeHeaderBytes));
  }
  if (GetBe(b, 0, 4) != kProbeMagic) return core::InvalidArgumentError("probe: bad magic");
  if (GetBe(b, 4, 1) != kProbeVersion) return core::InvalidArgumentError("probe: bad version");
  ProbeHeader h;
  h.kind = static_cast<uint8_t>(GetBe(b, 5, 1));
  if (h.kind != kProbeRequest && h.kind != kProbeReply) {
    return core::InvalidArgumentError("probe: bad kind");
  }
  if (GetBe(b, 6, 2) != 0) return core::InvalidArgumentError("probe: reserved field not zero");
  h.sequence = GetBe(b, 8, 8);
  h.send_ns = GetBe(b, 16, 8);
  return h;
}

// ---------------------------------------------------------------------------------------------
// Responder.

core::Result<std::unique_ptr<UdpProbeResponder>> UdpProbeResponder::Start(
    const std::vector<std::string>& addresses, uint16_t port) {
  std::unique_ptr<UdpProbeResponder> r(new UdpProbeResponder());
  auto fail = [&r](const core::Status& s) {
    for (int fd : r->fds_) ::close(fd);
    r->fds_.clear();
    return s.WithContext("probe responder");
  };
  if (addresses.empty()) {
    auto fd = BoundSocket(Wildcard(AF_INET6, port), /*dual_stack=*/true);
    if (!fd.ok()) {
      // No IPv6 on this host: IPv4 only.
      auto fd4 = BoundSocket(Wildcard(AF_INET, port), false);
      if (!fd4.ok()) return fail(fd4.status());
      fd = fd4;
      r->bound_.push_back("0.0.0.0");
    } else {
      r->bound_.push_back("[::]");
    }
    r->fds_.push_back(*fd);
    r->port_ = LocalPort(*fd);
  } else {
    for (const std::string& text : addresses) {
      auto gid = ParseGid(text);
      if (!gid.ok()) return fail(gid.status().WithContext(text));
      const SockAddr local = ToSockAddr(*gid, r->port_ != 0 ? r->port_ : port);
      auto fd = BoundSocket(local, false);
      if (!fd.ok()) return fail(fd.status());
      r->fds_.push_back(*fd);
      r->bound_.push_back(FormatHost(local));
      if (r->port_ == 0) r->port_ = LocalPort(*fd);
    }
  }
  r->stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->stop_fd_ < 0) return fail(core::InternalError(Errno("eventfd")));
  r->worker_ = std::thread([p = r.get()] { p->Serve(); });
  return r;
}

UdpProbeResponder::~UdpProbeResponder() {
  if (worker_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    worker_.join();
  }
  for (int fd : fds_) ::close(fd);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

UdpProbeResponder::Stats UdpProbeResponder::stats() const {
  return {echoed_.load(), bad_.load(), send_errors_.load()};
}

std::vector<std::string> UdpProbeResponder::RecentPeers() const {
  std::lock_guard<std::mutex> l(mu_);
  return {recent_.begin(), recent_.end()};
}

void UdpProbeResponder::Serve() {
  std::vector<pollfd> pfds;
  for (int fd : fds_) pfds.push_back({fd, POLLIN, 0});
  pfds.push_back({stop_fd_, POLLIN, 0});
  char buf[256];
  for (;;) {
    if (::poll(pfds.data(), pfds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;  // Cannot happen with valid fds; the status shows the counters stop moving.
    }
    if (pfds.back().revents != 0) return;
    for (size_t i = 0; i + 1 < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      for (;;) {
        sockaddr_storage peer{};
        socklen_t plen = sizeof peer;
        // MSG_TRUNC: n is the datagram's real size, so an oversized one is refused by size.
        const ssize_t n = ::recvfrom(pfds[i].fd, buf, sizeof buf, MSG_TRUNC,
                                     reinterpret_cast<sockaddr*>(&peer), &plen);
        if (n < 0) break;  // EAGAIN (drained) or a queued ICMP error: nothing to do.
        auto h = DecodeProbeHeader(std::string_view(buf, std::min<size_t>(n, sizeof buf)));
        if (static_cast<size_t>(n) > sizeof buf || !h.ok() || h->kind != kProbeRequest) {
          ++bad_;
          continue;
        }
        {
          // Recorded before the echo leaves, so a sender that has its reply finds itself here.
          std::lock_guard<std::mutex> l(mu_);
          recent_.push_back(FormatSockAddr(reinterpret_cast<sockaddr*>(&peer)));
          while (recent_.size() > kRecentPeers) recent_.pop_front();
        }
        ProbeHeader reply = *h;
        reply.kind = kProbeReply;
        const std::string out = EncodeProbeHeader(reply);
        if (::sendto(pfds[i].fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&peer),
                     plen) != static_cast<ssize_t>(out.size())) {
          ++send_errors_;
        } else {
          ++echoed_;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Targets and rounds.

std::string ProbeTarget::Key() const {
  return device + " " + remote_gid + " sport " + std::to_string(sport);
}

double TargetStats::loss() const {
  const int tried = sent + send_errors;
  return tried == 0 ? 0.0 : 1.0 - static_cast<double>(received) / tried;
}

bool TargetStats::all_lost() const { return sent + send_errors > 0 && received == 0; }

std::string TargetStats::Describe() const {
  std::string jobs;
  for (const std::string& j : target.jobs) jobs += (jobs.empty() ? "" : ",") + j;
  std::string s = "jobs " + jobs + ": ";
  if (!error.empty()) return s + "error: " + error;
  char loss_text[32];
  std::snprintf(loss_text, sizeof loss_text, "%.3f", loss());
  s += "sent " + std::to_string(sent) + " received " + std::to_string(received) + " loss " +
       loss_text;
  if (send_errors > 0) s += " send_errors " + std::to_string(send_errors);
  if (!rtt_us.empty()) {
    s += " rtt_us min " + FormatUs(rtt_us.front()) + " median " +
         FormatUs(rtt_us[rtt_us.size() / 2]) + " max " + FormatUs(rtt_us.back());
  }
  return s;
}

std::vector<ProbeTarget> ProbeTargetsOf(const ProbeContext& context) {
  std::map<std::tuple<std::string, std::string, uint16_t>, ProbeTarget> by_key;
  for (const auto& [job, table] : context.pins) {
    for (const Pin& p : table.pins) {
      ProbeTarget& t = by_key[{p.device, p.remote_gid, p.sport}];
      t.device = p.device;
      t.remote_gid = p.remote_gid;
      t.sport = p.sport;
      if (t.jobs.empty() || t.jobs.back() != job) t.jobs.push_back(job);
    }
  }
  std::vector<ProbeTarget> out;
  out.reserve(by_key.size());
  for (auto& [k, t] : by_key) out.push_back(std::move(t));
  return out;
}

std::vector<TargetStats> RunProbeRound(const std::vector<ProbeTarget>& targets,
                                       const UdpProbeOptions& options, int stop_fd) {
  std::vector<TargetStats> stats(targets.size());
  std::vector<SockAddr> remotes(targets.size());
  std::vector<int> socket_of(targets.size(), -1);  // Index into fds.
  std::vector<int> fds;
  // (family, local address bytes, sport) -> index into fds, or the bind error.
  std::map<std::tuple<int, std::string, uint16_t>, std::variant<int, std::string>> groups;
  for (size_t i = 0; i < targets.size(); ++i) {
    const ProbeTarget& t = targets[i];
    stats[i].target = t;
    auto gid = ParseGid(t.remote_gid);
    if (!gid.ok()) {
      stats[i].error = "remote_gid: " + gid.status().message();
      continue;
    }
    if (!IsV4Mapped(*gid) && (*gid)[0] == 0xfe && ((*gid)[1] & 0xc0) == 0x80) {
      stats[i].error = "link-local remote GID not probed (no scope id)";
      continue;
    }
    remotes[i] = ToSockAddr(*gid, options.port);
    const int family = remotes[i].family();
    SockAddr local = Wildcard(family, t.sport);
    auto dev = options.device_addresses.find(t.device);
    if (dev != options.device_addresses.end() && !dev->second.empty()) {
      auto lg = ParseGid(dev->second);
      if (lg.ok()) {
        SockAddr l = ToSockAddr(*lg, t.sport);
        if (l.family() == family) local = l;
      }
    }
    const std::string local_bytes(reinterpret_cast<const char*>(&local.ss), local.len);
    auto [it, fresh] = groups.try_emplace({family, local_bytes, t.sport}, std::string());
    if (fresh) {
      auto fd = BoundSocket(local, false);
      if (fd.ok()) {
        it->second = static_cast<int>(fds.size());
        fds.push_back(*fd);
      } else {
        it->second = fd.status().message();
      }
    }
    if (const int* idx = std::get_if<int>(&it->second)) {
      socket_of[i] = *idx;
    } else {
      stats[i].error = std::get<std::string>(it->second);
    }
  }

  // Send.
  struct Outstanding {
    size_t target;
    uint64_t send_ns;
  };
  std::unordered_map<uint64_t, Outstanding> outstanding;
  uint64_t last_send = SteadyNs();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (socket_of[i] < 0) continue;
    for (int k = 0; k < options.count; ++k) {
      ProbeHeader h;
      h.kind = kProbeRequest;
      h.sequence = g_next_sequence.fetch_add(1);
      h.send_ns = SteadyNs();
      const std::string out = EncodeProbeHeader(h);
      if (::sendto(fds[socket_of[i]], out.data(), out.size(), 0, remotes[i].sa(), remotes[i].len) ==
          static_cast<ssize_t>(out.size())) {
        ++stats[i].sent;
        outstanding.emplace(h.sequence, Outstanding{i, h.send_ns});
      } else {
        ++stats[i].send_errors;
      }
      last_send = h.send_ns;
    }
  }

  // Collect until every echo came, the timeout passed (after the last request) or stop.
  const uint64_t timeout_ns = static_cast<uint64_t>(options.timeout_ms) * 1000000;
  const uint64_t deadline = last_send + timeout_ns;
  std::vector<pollfd> pfds;
  for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
  if (stop_fd >= 0) pfds.push_back({stop_fd, POLLIN, 0});
  char buf[256];
  while (!outstanding.empty() && !pfds.empty()) {
    const uint64_t now = SteadyNs();
    if (now >= deadline) break;
    const int wait_ms = static_cast<int>((deadline - now + 999999) / 1000000);
    const int n = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (stop_fd >= 0 && pfds.back().revents != 0) break;
    for (size_t s = 0; s < fds.size(); ++s) {
      if (pfds[s].revents == 0) continue;
      for (;;) {
        const ssize_t r = ::recv(fds[s], buf, sizeof buf, MSG_TRUNC);
        if (r < 0) break;
        const uint64_t at = SteadyNs();
        if (static_cast<size_t>(r) > sizeof buf) continue;
        auto h = DecodeProbeHeader(std::string_view(buf, r));
        if (!h.ok() || h->kind != kProbeReply) continue;
        auto o = outstanding.find(h->sequence);
        if (o == outstanding.end()) continue;  // A late echo of an earlier round, or forged.
        // The echo carries our send time back; trust ours (the map), not the wire.
        const uint64_t rtt = at - o->second.send_ns;
        if (rtt <= timeout_ns) {
          TargetStats& ts = stats[o->second.target];
          ++ts.received;
          ts.rtt_us.push_back(static_cast<double>(rtt) / 1000.0);
        }
        outstanding.erase(o);
      }
    }
  }
  for (int fd : fds) ::close(fd);
  for (TargetStats& ts : stats) std::sort(ts.rtt_us.begin(), ts.rtt_us.end());
  return stats;
}

// ---------------------------------------------------------------------------------------------
// The HostProbe.

UdpPathProbe::UdpPathProbe(UdpProbeOptions options,
                           std::shared_ptr<const UdpProbeResponder> responder)
    : options_(std::move(options)), responder_(std::move(responder)) {
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  // -1: rounds just cannot be cut short.
  worker_ = std::thread([this] { Work(); });
}

UdpPathProbe::~UdpPathProbe() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }
  worker_.join();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

core::Duration UdpPathProbe::interval() const {
  return core::Duration::Millis(options_.interval_ms);
}

ProbeResult UdpPathProbe::Run(const ProbeContext& context) {
  std::vector<ProbeTarget> targets = ProbeTargetsOf(context);
  size_t skipped = 0;
  if (targets.size() > kMaxProbeTargets) {
    skipped = targets.size() - kMaxProbeTargets;
    targets.resize(kMaxProbeTargets);
  }
  std::lock_guard<std::mutex> l(mu_);
  auto keys = [](const std::vector<ProbeTarget>& v) {
    std::vector<std::string> k;
    for (const ProbeTarget& t : v) k.push_back(t.Key());
    return k;
  };
  if (keys(targets) != keys(targets_)) cv_.notify_all();  // New flows: probe them now.
  targets_ = std::move(targets);
  skipped_ = skipped;
  if (last_) return *last_;
  ProbeResult r;
  r.summary = "no round yet";
  return r;
}

void UdpPathProbe::Work() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    const std::vector<ProbeTarget> targets = targets_;
    const size_t skipped = skipped_;
    const auto start = std::chrono::steady_clock::now();
    l.unlock();
    std::vector<TargetStats> stats;
    if (!targets.empty()) stats = RunProbeRound(targets, options_, stop_fd_);
    ProbeResult result = Summarise(stats, skipped);
    l.lock();
    last_ = std::move(result);
    ++rounds_;
    std::vector<std::string> before;
    for (const ProbeTarget& t : targets) before.push_back(t.Key());
    cv_.wait_until(l, start + std::chrono::milliseconds(options_.interval_ms), [&] {
      if (stopping_) return true;
      if (targets_.size() != before.size()) return true;
      for (size_t i = 0; i < before.size(); ++i) {
        if (targets_[i].Key() != before[i]) return true;
      }
      return false;
    });
  }
}

ProbeResult UdpPathProbe::Summarise(const std::vector<TargetStats>& stats, size_t skipped) const {
  ProbeResult r;
  int clean = 0, lossy = 0, lost = 0, errors = 0;
  for (const TargetStats& s : stats) {
    r.data[s.target.Key()] = s.Describe();
    if (!s.error.empty()) {
      ++errors;
    } else if (s.all_lost()) {
      ++lost;
    } else if (s.received < s.sent + s.send_errors) {
      ++lossy;
    } else {
      ++clean;
    }
  }
  r.ok = lost == 0;
  if (stats.empty()) {
    r.summary = "no pinned flows to probe";
  } else {
    r.summary = std::to_string(stats.size()) + " flows to port " + std::to_string(options_.port) +
                ": " + std::to_string(clean) + " no loss, " + std::to_string(lossy) + " lossy, " +
                std::to_string(lost) + " all lost, " + std::to_string(errors) + " not probed";
  }
  if (skipped > 0) {
    r.summary +=
        ", " + std::to_string(skipped) + " skipped (over " + std::to_string(kMaxProbeTargets) + ")";
    r.data["skipped"] = std::to_string(skipped);
  }
  if (responder_) {
    const UdpProbeResponder::Stats rs = responder_->stats();
    std::string on;
    for (const std::string& b : responder_->bound()) on += (on.empty() ? "" : ",") + b;
    r.data["responder"] = "port " + std::to_string(responder_->port()) + " on " + on + ": echoed " +
                          std::to_string(rs.echoed) + " bad " + std::to_string(rs.bad) +
                          " send_errors " + std::to_string(rs.send_errors);
  }
  return r;
}

core::Result<std::unique_ptr<HostProbe>> MakeUdpPathProbe(const HostdConfig& config) {
  UdpProbeOptions o;
  o.port = config.probes.port;
  o.interval_ms = config.probes.interval_ms;
  o.count = config.probes.count;
  o.timeout_ms = config.probes.timeout_ms;
  std::vector<std::string> addresses;
  for (const NicConfig& n : config.nics) {
    if (n.address.empty()) continue;
    o.device_addresses[n.device] = n.address;
    if (std::find(addresses.begin(), addresses.end(), n.address) == addresses.end()) {
      addresses.push_back(n.address);
    }
  }
  auto responder = UdpProbeResponder::Start(addresses, o.port);
  if (!responder.ok()) return responder.status().WithContext("probes.port");
  std::shared_ptr<const UdpProbeResponder> shared(std::move(*responder));
  return std::unique_ptr<HostProbe>(new UdpPathProbe(std::move(o), std::move(shared)));
}

}  // namespace crux::hostd
