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

std::string EncodeTrainDatagram(const TrainDatagram& d, size_t size) {
  ProbeHeader h;
  h.kind = kProbeTrain;
  h.sequence = d.train;
  h.send_ns = (uint64_t{d.index} << 32) | d.count;
  std::string out = EncodeProbeHeader(h);
  out.resize(std::max(size, kProbeHeaderBytes), '\0');
  return out;
}

std::string EncodeTrainEnd(uint64_t train) {
  ProbeHeader h;
  h.kind = kProbeTrainEnd;
  h.sequence = train;
  std::string out = EncodeProbeHeader(h);
  out.resize(kTrainControlBytes, '\0');
  return out;
}

std::string EncodeTrainReport(const TrainReport& r) {
  ProbeHeader h;
  h.kind = kProbeTrainReport;
  h.sequence = r.train;
  std::string out = EncodeProbeHeader(h);
  PutBe(out, r.received, 4);
  PutBe(out, 0, 4);
  PutBe(out, r.spread_ns, 8);
  PutBe(out, r.bytes, 8);
  return out;
}

core::Result<ProbeDatagram> DecodeProbeDatagram(std::string_view prefix, size_t size) {
  if (prefix.size() < kProbeHeaderBytes || size < kProbeHeaderBytes) {
    return core::InvalidArgumentError("probe: " + std::to_string(size) + " bytes, want at least " +
                                      std::to_string(kProbeHeaderBytes));
  }
  if (GetBe(prefix, 0, 4) != kProbeMagic) return core::InvalidArgumentError("probe: bad magic");
  if (GetBe(prefix, 4, 1) != kProbeVersion) {
    return core::InvalidArgumentError("probe: bad version");
  }
  if (GetBe(prefix, 6, 2) != 0) return core::InvalidArgumentError("probe: reserved field not zero");
  ProbeDatagram d;
  d.kind = static_cast<uint8_t>(GetBe(prefix, 5, 1));
  const uint64_t sequence = GetBe(prefix, 8, 8);
  const uint64_t word = GetBe(prefix, 16, 8);
  auto want_size = [&](size_t want) -> core::Status {
    if (size == want && prefix.size() >= want) return core::Status::Ok();
    return core::InvalidArgumentError("probe: kind " + std::to_string(d.kind) + " of " +
                                      std::to_string(size) + " bytes, want " +
                                      std::to_string(want));
  };
  switch (d.kind) {
    case kProbeRequest:
    case kProbeReply: {
      CRUX_RETURN_IF_ERROR(want_size(kProbeHeaderBytes));
      d.header = {d.kind, sequence, word};
      return d;
    }
    case kProbeTrain: {
      d.train = {sequence, static_cast<uint32_t>(word >> 32),
                 static_cast<uint32_t>(word & 0xffffffffu)};
      if (d.train.count < 2 || d.train.index >= d.train.count) {
        return core::InvalidArgumentError("probe: train datagram " + std::to_string(d.train.index) +
                                          " of " + std::to_string(d.train.count));
      }
      return d;
    }
    case kProbeTrainEnd: {
      CRUX_RETURN_IF_ERROR(want_size(kTrainControlBytes));
      for (size_t i = kProbeHeaderBytes; i < kTrainControlBytes; ++i) {
        if (prefix[i] != 0) return core::InvalidArgumentError("probe: train end padding not zero");
      }
      d.train.train = sequence;
      return d;
    }
    case kProbeTrainReport: {
      CRUX_RETURN_IF_ERROR(want_size(kTrainControlBytes));
      if (GetBe(prefix, 28, 4) != 0) {
        return core::InvalidArgumentError("probe: train report reserved field not zero");
      }
      d.report.train = sequence;
      d.report.received = static_cast<uint32_t>(GetBe(prefix, 24, 4));
      d.report.spread_ns = GetBe(prefix, 32, 8);
      d.report.bytes = GetBe(prefix, 40, 8);
      return d;
    }
    default:
      return core::InvalidArgumentError("probe: bad kind");
  }
}

// ---------------------------------------------------------------------------------------------
// Capacity from a train's dispersion.

void TrainArrivals::Add(core::Duration at, uint64_t bytes) {
  if (received_ == 0) {
    first_ = at;
    last_ = at;
  } else {
    // Any order: the spread is first to last arrival; the earliest datagram's bytes are the ones
    // that do not count (they arrived at the start of the spread, not during it).
    if (at < first_) {
      first_ = at;
    } else if (at > last_) {
      last_ = at;
    }
    bytes_after_first_ += bytes;
  }
  ++received_;
}

TrainReport TrainArrivals::Report(uint64_t train) const {
  TrainReport r;
  r.train = train;
  r.received = received_;
  r.spread_ns = received_ == 0 ? 0 : static_cast<uint64_t>((last_ - first_).nanos());
  r.bytes = bytes_after_first_;
  return r;
}

TrainVerdict EstimateTrainCapacity(uint32_t sent, core::Duration send_time,
                                   const std::optional<TrainReport>& report) {
  TrainVerdict v;
  CapacityMeasurement& m = v.measurement;
  m.sent = sent;
  m.send_time = send_time;
  if (sent == 0) {
    v.note = "nothing sent";
    return v;
  }
  if (!report || report->received == 0) {
    m.lost = true;
    v.measured = true;
    v.note = report ? "nothing of the train arrived" : "no report from the responder";
    return v;
  }
  m.received = std::min(report->received, sent);
  if (report->received < 2 || report->bytes == 0) {
    v.note = "fewer than 2 datagrams arrived: no dispersion";
    return v;
  }
  const core::Duration spread = core::Duration::Nanos(
      static_cast<int64_t>(std::min<uint64_t>(report->spread_ns, uint64_t{1} << 62)));
  m.bytes = core::Bytes::Of(static_cast<int64_t>(std::min<uint64_t>(report->bytes, 1ULL << 62)));
  m.sender_limited = spread.ToSeconds() <= send_time.ToSeconds() * (1 + kSenderLimitedMargin);
  m.transfer_time = m.sender_limited ? std::max(spread, send_time) : spread;
  if (m.transfer_time <= core::Duration::Zero()) {
    v.note = "no spread at either end: no dispersion";
    return v;
  }
  v.measured = true;
  return v;
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
  for (int fd : r->fds_) {
    // Kernel receive timestamps for the trains' dispersion (a failure leaves the steady clock).
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
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
  return {echoed_.load(), bad_.load(), send_errors_.load(), train_datagrams_.load(),
          trains_reported_.load()};
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
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
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
        iovec iov{buf, sizeof buf};
        msghdr msg{};
        msg.msg_name = &peer;
        msg.msg_namelen = sizeof peer;
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        // MSG_TRUNC: n is the datagram's real size (a train datagram is larger than buf: only its
        // header is read).
        const ssize_t n = ::recvmsg(pfds[i].fd, &msg, MSG_TRUNC);
        if (n < 0) break;  // EAGAIN (drained) or a queued ICMP error: nothing to do.
        const socklen_t plen = msg.msg_namelen;
        std::optional<core::Duration> at;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            timespec ts;
            std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
            // The kernel's receive time: only differences are used (a train's spread).
            at = core::Duration::Nanos(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
          }
        }
        if (!at) at = core::Duration::Nanos(static_cast<int64_t>(SteadyNs()));
        auto d = DecodeProbeDatagram(std::string_view(buf, std::min<size_t>(n, sizeof buf)),
                                     static_cast<size_t>(n));
        if (!d.ok() || d->kind == kProbeReply || d->kind == kProbeTrainReport) {
          ++bad_;
          continue;
        }
        const std::string from = FormatSockAddr(reinterpret_cast<sockaddr*>(&peer));
        if (d->kind == kProbeTrain) {
          ++train_datagrams_;
          const std::pair<std::string, uint64_t> key{from, d->train.train};
          auto [it, fresh] = trains_.try_emplace(key);
          if (fresh) {
            train_order_.push_back(key);
            while (train_order_.size() > kMaxResponderTrains) {
              trains_.erase(train_order_.front());
              train_order_.pop_front();
            }
          }
          it->second.Add(*at, static_cast<uint64_t>(n));
          continue;
        }
        {
          // Recorded before the answer leaves, so a sender that has its reply finds itself here.
          std::lock_guard<std::mutex> l(mu_);
          recent_.push_back(from);
          while (recent_.size() > kRecentPeers) recent_.pop_front();
        }
        std::string out;
        if (d->kind == kProbeTrainEnd) {
          // The report (as many bytes as the request); an unknown train reports nothing received.
          const std::pair<std::string, uint64_t> key{from, d->train.train};
          auto it = trains_.find(key);
          out = EncodeTrainReport(it == trains_.end() ? TrainReport{d->train.train, 0, 0, 0}
                                                      : it->second.Report(d->train.train));
          if (it != trains_.end()) {
            trains_.erase(it);
            train_order_.erase(std::find(train_order_.begin(), train_order_.end(), key));
          }
        } else {
          ProbeHeader reply = d->header;
          reply.kind = kProbeReply;
          out = EncodeProbeHeader(reply);
        }
        if (::sendto(pfds[i].fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&peer),
                     plen) != static_cast<ssize_t>(out.size())) {
          ++send_errors_;
        } else if (d->kind == kProbeTrainEnd) {
          ++trains_reported_;
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

std::string TrainTarget::Key() const {
  return "train " + probe.src_nic + " -> " + probe.dst_nic + " sport " +
         std::to_string(probe.sport);
}

std::vector<TrainTarget> TrainTargetsOf(const ProbeContext& context) {
  std::map<std::tuple<std::string, std::string, uint16_t>, TrainTarget> by_key;
  for (const auto& [job, planned] : context.planned) {
    for (const PlannedProbe& p : planned) {
      auto [it, fresh] = by_key.try_emplace({p.src_nic, p.dst_nic, p.sport});
      TrainTarget& t = it->second;
      if (fresh) t.probe = p;
      if (t.jobs.empty() || t.jobs.back() != job) t.jobs.push_back(job);
    }
  }
  std::vector<TrainTarget> out;
  out.reserve(by_key.size());
  for (auto& [k, t] : by_key) out.push_back(std::move(t));
  return out;
}

namespace {

// The socket options of a train's sender: the job's traffic class, no fragmentation (a fragment
// carries no UDP ports, so an ECMP hash would place it apart from the probe's path).
void SetTrainSocketOptions(int fd, int family, int traffic_class, size_t train_bytes) {
  const int tclass = traffic_class & 0xff;
  const int sndbuf = static_cast<int>(std::min<size_t>(train_bytes * 2, 64u << 20));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  if (family == AF_INET) {
    ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tclass, sizeof tclass);
    const int pmtu = IP_PMTUDISC_DO;
    ::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  } else {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass);
    const int dontfrag = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, &dontfrag, sizeof dontfrag);
  }
}

// Waits up to `wait_ns` for the report of `train` on `fd` (or `stop_fd`); sets *stopped.
std::optional<TrainReport> AwaitTrainReport(int fd, uint64_t train, uint64_t wait_ns, int stop_fd,
                                            bool* stopped) {
  const uint64_t deadline = SteadyNs() + wait_ns;
  pollfd pfds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  const nfds_t n = stop_fd >= 0 ? 2 : 1;
  char buf[256];
  for (;;) {
    const uint64_t now = SteadyNs();
    if (now >= deadline) return std::nullopt;
    const int wait_ms = static_cast<int>((deadline - now + 999999) / 1000000);
    const int r = ::poll(pfds, n, wait_ms);
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (r <= 0) continue;
    if (n == 2 && pfds[1].revents != 0) {
      *stopped = true;
      return std::nullopt;
    }
    for (;;) {
      const ssize_t got = ::recv(fd, buf, sizeof buf, MSG_TRUNC);
      if (got < 0) break;
      auto d = DecodeProbeDatagram(std::string_view(buf, std::min<size_t>(got, sizeof buf)),
                                   static_cast<size_t>(got));
      if (d.ok() && d->kind == kProbeTrainReport && d->report.train == train) return d->report;
    }
  }
}

}  // namespace

namespace {

// One train per target (RunTrainRound's pass); *stopped once stop_fd was readable.
std::vector<TrainVerdict> OneTrainEach(const std::vector<TrainTarget>& targets,
                                       const UdpProbeOptions& options, int stop_fd, bool& stopped) {
  std::vector<TrainVerdict> out(targets.size());
  const int count = std::clamp(options.train_count, 2, 1024);
  const size_t bytes =
      std::max<size_t>(static_cast<size_t>(options.train_bytes), kTrainControlBytes);
  const uint64_t timeout_ns =
      static_cast<uint64_t>(std::max<int64_t>(options.timeout_ms, 2)) * 1000000;
  for (size_t i = 0; i < targets.size(); ++i) {
    const TrainTarget& t = targets[i];
    TrainVerdict& v = out[i];
    auto fill = [&t](TrainVerdict& verdict) {
      CapacityMeasurement& m = verdict.measurement;
      m.jobs = t.jobs;
      m.src_nic = t.probe.src_nic;
      m.dst_nic = t.probe.dst_nic;
      m.sport = t.probe.sport;
    };
    fill(v);
    if (stopped) {
      v.note = "stopped";
      continue;
    }
    auto gid = ParseGid(t.probe.remote_gid);
    if (!gid.ok()) {
      v.note = "remote_gid: " + gid.status().message();
      continue;
    }
    if (!IsV4Mapped(*gid) && (*gid)[0] == 0xfe && ((*gid)[1] & 0xc0) == 0x80) {
      v.note = "link-local remote GID not probed (no scope id)";
      continue;
    }
    const SockAddr remote = ToSockAddr(*gid, options.port);
    SockAddr local = Wildcard(remote.family(), t.probe.sport);
    auto dev = options.device_addresses.find(t.probe.device);
    if (dev != options.device_addresses.end() && !dev->second.empty()) {
      auto lg = ParseGid(dev->second);
      if (lg.ok()) {
        SockAddr l = ToSockAddr(*lg, t.probe.sport);
        if (l.family() == remote.family()) local = l;
      }
    }
    auto fd = BoundSocket(local, false);
    if (!fd.ok()) {
      v.note = fd.status().message();
      continue;
    }
    SetTrainSocketOptions(*fd, remote.family(), t.probe.traffic_class,
                          bytes * static_cast<size_t>(count));
    const uint64_t train = g_next_sequence.fetch_add(1);
    std::vector<std::string> datagrams;
    datagrams.reserve(static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) {
      datagrams.push_back(EncodeTrainDatagram(
          {train, static_cast<uint32_t>(k), static_cast<uint32_t>(count)}, bytes));
    }
    uint32_t sent = 0;
    uint64_t first_sent = 0, last_sent = 0;
    std::string send_error;
    for (const std::string& d : datagrams) {
      if (::sendto(*fd, d.data(), d.size(), 0, remote.sa(), remote.len) ==
          static_cast<ssize_t>(d.size())) {
        last_sent = SteadyNs();
        if (sent++ == 0) first_sent = last_sent;
      } else if (send_error.empty()) {
        send_error = Errno("send");
      }
    }
    if (sent < 2) {
      v.note = send_error.empty() ? "fewer than 2 datagrams sent" : send_error;
      ::close(*fd);
      continue;
    }
    std::optional<TrainReport> report;
    const std::string end = EncodeTrainEnd(train);
    for (int attempt = 0; attempt < 2 && !report && !stopped; ++attempt) {
      (void)!::sendto(*fd, end.data(), end.size(), 0, remote.sa(), remote.len);
      report = AwaitTrainReport(*fd, train, timeout_ns / 2, stop_fd, &stopped);
    }
    ::close(*fd);
    if (stopped) {
      v.note = "stopped";
      continue;
    }
    if (report && (report->received > sent ||
                   report->bytes > uint64_t{sent - 1} * static_cast<uint64_t>(bytes))) {
      // More than was sent: a garbled (or forged) report, not a measurement.
      v.note = "implausible report: " + std::to_string(report->received) + " datagrams, " +
               std::to_string(report->bytes) + " bytes of " + std::to_string(sent) + " sent";
      continue;
    }
    v = EstimateTrainCapacity(
        sent, core::Duration::Nanos(static_cast<int64_t>(last_sent - first_sent)), report);
    fill(v);
    if (!send_error.empty()) v.note += (v.note.empty() ? "" : "; ") + send_error;
  }
  return out;
}

double RateOf(const CapacityMeasurement& m) {
  return m.transfer_time > core::Duration::Zero() ? m.bytes.ToBits() / m.transfer_time.ToSeconds()
                                                  : 0;
}

}  // namespace

const TrainVerdict& BetterTrain(const TrainVerdict& a, const TrainVerdict& b) {
  const bool a_rate = a.measured && !a.measurement.lost;
  const bool b_rate = b.measured && !b.measurement.lost;
  if (a_rate != b_rate) return a_rate ? a : b;
  if (a_rate) return RateOf(b.measurement) > RateOf(a.measurement) ? b : a;
  if (a.measured != b.measured) return a.measured ? a : b;  // A loss says more than nothing.
  return a;
}

std::vector<TrainVerdict> RunTrainRound(const std::vector<TrainTarget>& targets,
                                        const UdpProbeOptions& options, int stop_fd) {
  bool stopped = false;
  std::vector<TrainVerdict> best = OneTrainEach(targets, options, stop_fd, stopped);
  for (int pass = 1; pass < std::max(options.trains_per_probe, 1) && !stopped; ++pass) {
    const std::vector<TrainVerdict> next = OneTrainEach(targets, options, stop_fd, stopped);
    for (size_t i = 0; i < best.size(); ++i) {
      if (&BetterTrain(best[i], next[i]) == &next[i]) best[i] = next[i];
    }
  }
  return best;
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
  std::vector<TrainTarget> trains;
  if (options_.train_count > 0) trains = TrainTargetsOf(context);
  size_t trains_skipped = 0;
  if (trains.size() > kMaxTrainTargets) {
    trains_skipped = trains.size() - kMaxTrainTargets;
    trains.resize(kMaxTrainTargets);
  }
  std::lock_guard<std::mutex> l(mu_);
  auto keys = [](const auto& v) {
    std::vector<std::string> k;
    for (const auto& t : v) k.push_back(t.Key());
    return k;
  };
  // New flows or probes: probe them now.
  if (keys(targets) != keys(targets_) || keys(trains) != keys(trains_)) cv_.notify_all();
  targets_ = std::move(targets);
  skipped_ = skipped;
  trains_ = std::move(trains);
  trains_skipped_ = trains_skipped;
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
    const std::vector<TrainTarget> trains = trains_;
    const size_t trains_skipped = trains_skipped_;
    const auto start = std::chrono::steady_clock::now();
    l.unlock();
    std::vector<TargetStats> stats;
    if (!targets.empty()) stats = RunProbeRound(targets, options_, stop_fd_);
    std::vector<TrainVerdict> verdicts;
    if (!trains.empty()) verdicts = RunTrainRound(trains, options_, stop_fd_);
    // A train is lost only toward a responder that has answered before: a remote host whose
    // agent runs no responder (probes off, an older crux-hostd) would otherwise look like a dead
    // path on every round.
    for (const TargetStats& t : stats) {
      if (t.received > 0) answered_.insert(t.target.remote_gid);
    }
    for (size_t i = 0; i < verdicts.size() && i < trains.size(); ++i) {
      TrainVerdict& v = verdicts[i];
      const std::string& remote = trains[i].probe.remote_gid;
      if (v.measured && !v.measurement.lost) {
        answered_.insert(remote);
      } else if (v.measured && v.measurement.lost && v.note == "no report from the responder" &&
                 !answered_.contains(remote)) {
        v.measured = false;
        v.note =
            "no report, and no responder at " + remote + " has answered yet (not counted as lost)";
      }
    }
    ProbeResult result = Summarise(stats, skipped, trains, verdicts, trains_skipped);
    l.lock();
    result.round = rounds_.load() + 1;
    last_ = std::move(result);
    ++rounds_;
    auto same = [](const auto& now, const auto& before) {
      if (now.size() != before.size()) return false;
      for (size_t i = 0; i < before.size(); ++i) {
        if (now[i].Key() != before[i].Key()) return false;
      }
      return true;
    };
    cv_.wait_until(l, start + std::chrono::milliseconds(options_.interval_ms),
                   [&] { return stopping_ || !same(targets_, targets) || !same(trains_, trains); });
  }
}

ProbeResult UdpPathProbe::Summarise(const std::vector<TargetStats>& stats, size_t skipped,
                                    const std::vector<TrainTarget>& trains,
                                    const std::vector<TrainVerdict>& verdicts,
                                    size_t trains_skipped) const {
  ProbeResult r;
  int measured = 0, limited = 0, trains_lost = 0, unmeasured = 0;
  for (size_t i = 0; i < trains.size() && i < verdicts.size(); ++i) {
    const TrainVerdict& v = verdicts[i];
    const CapacityMeasurement& m = v.measurement;
    std::string jobs;
    for (const std::string& j : trains[i].jobs) jobs += (jobs.empty() ? "" : ",") + j;
    std::string text = "jobs " + jobs + ": ";
    if (!v.measured) {
      ++unmeasured;
      text += "not measured: " + v.note;
    } else if (m.lost) {
      ++trains_lost;
      text += "lost (" + v.note + "), sent " + std::to_string(m.sent);
    } else {
      ++(m.sender_limited ? limited : measured);
      char gbps[32];
      std::snprintf(gbps, sizeof gbps, "%.3f",
                    m.bytes.ToBits() / m.transfer_time.ToSeconds() / 1e9);
      text += "sent " + std::to_string(m.sent) + " received " + std::to_string(m.received) +
              " bytes " + std::to_string(m.bytes.count()) + " in " +
              FormatUs(m.transfer_time.ToSeconds() * 1e6) + " us (sent in " +
              FormatUs(m.send_time.ToSeconds() * 1e6) + " us): " + gbps + " Gb/s" +
              (m.sender_limited ? " at least (sender-limited)" : "");
      if (!v.note.empty()) text += "; " + v.note;
    }
    r.data[trains[i].Key()] = text;
    if (v.measured) r.capacity.push_back(m);
  }
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
  r.ok = lost == 0 && trains_lost == 0;
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
  if (!trains.empty()) {
    r.summary += "; " + std::to_string(trains.size()) +
                 " capacity trains: " + std::to_string(measured) + " measured, " +
                 std::to_string(limited) + " sender-limited, " + std::to_string(trains_lost) +
                 " lost, " + std::to_string(unmeasured) + " not measured";
  }
  if (trains_skipped > 0) {
    r.summary += ", " + std::to_string(trains_skipped) + " trains skipped (over " +
                 std::to_string(kMaxTrainTargets) + ")";
    r.data["trains_skipped"] = std::to_string(trains_skipped);
  }
  if (responder_) {
    const UdpProbeResponder::Stats rs = responder_->stats();
    std::string on;
    for (const std::string& b : responder_->bound()) on += (on.empty() ? "" : ",") + b;
    r.data["responder"] = "port " + std::to_string(responder_->port()) + " on " + on + ": echoed " +
                          std::to_string(rs.echoed) + " bad " + std::to_string(rs.bad) +
                          " send_errors " + std::to_string(rs.send_errors) + " train_datagrams " +
                          std::to_string(rs.train_datagrams) + " trains_reported " +
                          std::to_string(rs.trains_reported);
  }
  return r;
}

core::Result<std::unique_ptr<HostProbe>> MakeUdpPathProbe(const HostdConfig& config) {
  UdpProbeOptions o;
  o.port = config.probes.port;
  o.interval_ms = config.probes.interval_ms;
  o.count = config.probes.count;
  o.timeout_ms = config.probes.timeout_ms;
  o.train_count = config.probes.train_count;
  o.train_bytes = config.probes.train_bytes;
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
