#include "crux/hostd/hostd_link.h"

#include <utility>

namespace crux::hostd {

HostdLink::HostdLink(std::string path, int64_t retry_ns)
    : path_(std::move(path)), retry_ns_(retry_ns) {}

bool HostdLink::Poll(int64_t now_ns) {
  if (conn_.is_open()) return false;
  if (tried_ && now_ns < next_try_ns_) return false;
  tried_ = true;
  next_try_ns_ = now_ns + retry_ns_;
  auto c = LocalConnection::Connect(path_);
  if (!c.ok()) {
    last_error_ = c.status().message();
    return false;
  }
  conn_ = std::move(*c);
  ++connects_;
  return true;
}

core::Status HostdLink::Send(const Message& m) {
  if (!conn_.is_open()) return core::UnavailableError("not connected to crux-hostd");
  core::Status s = conn_.Send(Encode(m));
  if (!s.ok()) {
    ++send_failures_;
    last_error_ = s.message();
    conn_.Close();
  }
  return s;
}

std::vector<Message> HostdLink::Receive() {
  std::vector<Message> out;
  while (conn_.is_open()) {
    auto r = conn_.Receive();
    if (!r.ok()) {
      last_error_ = r.status().message();
      break;
    }
    if (!r->has_value()) break;
    auto m = Decode(**r);
    if (!m.ok()) {
      ++bad_messages_;
      last_error_ = m.status().message();
      continue;
    }
    if (const auto* refused = std::get_if<Refused>(&*m)) {
      ++refusals_;
      last_error_ = "crux-hostd refused job '" + refused->job_id + "': " + refused->reason;
    }
    out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace crux::hostd
