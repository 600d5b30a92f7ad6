#include "crux/hostd/host_protocol.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "crux/hostd/job_id.h"

namespace crux::hostd {
namespace {

using nlohmann::json;

std::string HashText(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const char* RoleName(Role r) { return r == Role::kProfiler ? "profiler" : "verbs"; }

// Field readers: every error names "<type>.<field>".
class Reader {
 public:
  Reader(const json& j, std::string type) : j_(j), type_(std::move(type)) {}

  core::Status status() const { return status_; }

  std::string Str(const char* field, bool required = true, size_t max_len = 256) {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(field, "missing");
      return {};
    }
    if (!it->is_string()) {
      Fail(field, "must be a string");
      return {};
    }
    std::string s = it->get<std::string>();
    if (s.size() > max_len) Fail(field, "longer than " + std::to_string(max_len) + " bytes");
    return s;
  }

  int64_t Int(const char* field, int64_t lo, int64_t hi, bool required = true, int64_t def = 0) {
    auto it = j_.find(field);
    if (it == j_.end()) {
      if (required) Fail(field, "missing");
      return def;
    }
    if (!it->is_number_integer()) {
      Fail(field, "must be an integer");
      return def;
    }
    int64_t v = 0;
    if (it->is_number_unsigned()) {
      uint64_t u = it->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        Fail(field, "out of range");
        return def;
      }
      v = static_cast<int64_t>(u);
    } else {
      v = it->get<int64_t>();
    }
    if (v < lo || v > hi) {
      Fail(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                      std::to_string(v) + ")");
      return def;
    }
    return v;
  }

  uint64_t U64(const char* field, bool required = true) {
    auto it = j_.find(field);
    if (it == j_.end()) {
      if (required) Fail(field, "missing");
      return 0;
    }
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      Fail(field, "must be a non-negative integer");
      return 0;
    }
    return it->get<uint64_t>();
  }

  // Hashes travel as "0x..." text (JSON numbers lose precision above 2^53 in many readers).
  uint64_t Hash(const char* field) {
    std::string s = Str(field, true, 18);
    if (!status_.ok()) return 0;
    if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
      Fail(field, "must be a 0x-prefixed hex number");
      return 0;
    }
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str() + 2, &end, 16);
    if (errno != 0 || end == nullptr || *end != '\0') {
      Fail(field, "must be a 0x-prefixed hex number (got '" + s + "')");
      return 0;
    }
    return v;
  }

  bool Bool(const char* field, bool def) {
    auto it = j_.find(field);
    if (it == j_.end()) return def;
    if (!it->is_boolean()) {
      Fail(field, "must be true or false");
      return def;
    }
    return it->get<bool>();
  }

  const json* Array(const char* field, size_t max_items) {
    auto it = j_.find(field);
    if (it == j_.end()) return nullptr;
    if (!it->is_array()) {
      Fail(field, "must be an array");
      return nullptr;
    }
    if (it->size() > max_items) {
      Fail(field, "more than " + std::to_string(max_items) + " entries");
      return nullptr;
    }
    return &*it;
  }

  void Fail(const std::string& field, const std::string& what) {
    if (status_.ok()) {
      status_ = core::InvalidArgumentError("host message: " + type_ + "." + field + ": " + what);
    }
  }

 private:
  const json& j_;
  std::string type_;
  core::Status status_;
};

json EncodeBody(const Hello& m) {
  return {{"type", "hello"},           {"role", RoleName(m.role)},   {"pid", m.pid},
          {"job_id", m.job_id},        {"job_source", m.job_source}, {"abi", m.abi},
          {"local_slot", m.local_slot}};
}
json EncodeBody(const CommInfo& m) {
  return {{"type", "comm"},     {"comm", HashText(m.hash)}, {"rank", m.rank},  {"nranks", m.nranks},
          {"nnodes", m.nnodes}, {"name", m.name},           {"alive", m.alive}};
}
json EncodeBody(const RankProfile& m) {
  json comms = json::array();
  for (const auto& c : m.comms) {
    json peers = json::array();
    for (const auto& p : c.peers) peers.push_back({p.peer_rank, p.bytes});
    comms.push_back({{"comm", HashText(c.hash)}, {"bytes", c.bytes}, {"peers", peers}});
  }
  return {{"type", "profile"},          {"job_id", m.job_id},
          {"period_ns", m.period_ns},   {"comm_ns", m.comm_ns},
          {"compute_ns", m.compute_ns}, {"samples", m.samples},
          {"converged", m.converged},   {"comms", comms}};
}
json EncodeBody(const PluginStats& m) {
  return {{"type", "stats"},
          {"events", m.events},
          {"dropped", m.dropped},
          {"collectives", m.collectives},
          {"sampled_windows", m.sampled_windows}};
}
json EncodeBody(const QpInfo& m) {
  return {{"type", "qp"},           {"device", m.device},
          {"port", m.port},         {"qpn", m.qpn},
          {"dest_qpn", m.dest_qpn}, {"remote_gid", m.remote_gid},
          {"sport", m.sport},       {"traffic_class", m.traffic_class},
          {"pinned", m.pinned}};
}
json EncodeBody(const QpGone& m) {
  return {{"type", "qp_gone"}, {"device", m.device}, {"qpn", m.qpn}};
}
json EncodeBody(const RepinResult& m) {
  return {{"type", "repin"},  {"device", m.device}, {"qpn", m.qpn},
          {"sport", m.sport}, {"ok", m.ok},         {"error", m.error}};
}
json EncodeBody(const PinTable& m) {
  json pins = json::array();
  for (const auto& p : m.pins) pins.push_back({p.device, p.remote_gid, p.sport});
  return {{"type", "pins"},
          {"job_id", m.job_id},
          {"epoch", m.epoch},
          {"state_id", HashText(m.state_id)},
          {"traffic_class", m.traffic_class},
          {"pins", pins}};
}
json EncodeBody(const PinAck& m) {
  return {{"type", "pin_ack"},
          {"epoch", m.epoch},
          {"state_id", HashText(m.state_id)},
          {"ok", m.ok},
          {"error", m.error}};
}
json EncodeBody(const StatusRequest&) { return {{"type", "status"}}; }
json EncodeBody(const StatusReply& m) {
  json status = json::parse(m.json, nullptr, /*allow_exceptions=*/false);
  if (status.is_discarded()) status = json::object();
  return {{"type", "status_reply"}, {"status", status}};
}
json EncodeBody(const Refused& m) {
  return {{"type", "refused"}, {"job_id", m.job_id}, {"code", m.code}, {"reason", m.reason}};
}

core::Result<Message> DecodeBody(const json& j, const std::string& type) {
  Reader r(j, type);
  if (type == "hello") {
    Hello m;
    std::string role = r.Str("role");
    if (role == "profiler") {
      m.role = Role::kProfiler;
    } else if (role == "verbs") {
      m.role = Role::kVerbs;
    } else if (r.status().ok()) {
      r.Fail("role", "must be profiler or verbs (got '" + role + "')");
    }
    m.pid = r.Int("pid", 1, std::numeric_limits<int32_t>::max());
    m.job_id = r.Str("job_id", false, 128);
    if (!m.job_id.empty() && !IsValidJobId(m.job_id)) {
      r.Fail("job_id", "must be 1-128 chars of [A-Za-z0-9._:/-]");
    }
    m.job_source = r.Str("job_source", false, 64);
    m.abi = r.Str("abi", false, 32);
    m.local_slot = static_cast<int>(r.Int("local_slot", -1, kMaxLocalSlot, false, -1));
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "comm") {
    CommInfo m;
    m.hash = r.Hash("comm");
    m.nranks = static_cast<int>(r.Int("nranks", 1, 1 << 24));
    m.rank = static_cast<int>(r.Int("rank", 0, (1 << 24) - 1));
    if (r.status().ok() && m.rank >= m.nranks) r.Fail("rank", "must be < nranks");
    m.nnodes = static_cast<int>(r.Int("nnodes", 1, 1 << 24));
    m.name = r.Str("name", false);
    m.alive = r.Bool("alive", true);
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "profile") {
    RankProfile m;
    m.job_id = r.Str("job_id", true, 128);
    if (r.status().ok() && !IsValidJobId(m.job_id)) {
      r.Fail("job_id", "must be 1-128 chars of [A-Za-z0-9._:/-]");
    }
    constexpr int64_t kDay = 86400LL * 1000 * 1000 * 1000;
    m.period_ns = r.Int("period_ns", 1, kDay);
    m.comm_ns = r.Int("comm_ns", 0, kDay);
    m.compute_ns = r.Int("compute_ns", 0, kDay);
    m.samples = static_cast<uint32_t>(r.Int("samples", 0, 1 << 30));
    m.converged = r.Bool("converged", false);
    if (const json* comms = r.Array("comms", kMaxCommsPerProfile)) {
      for (size_t i = 0; i < comms->size() && r.status().ok(); ++i) {
        const json& c = (*comms)[i];
        if (!c.is_object()) {
          r.Fail("comms[" + std::to_string(i) + "]", "must be an object");
          break;
        }
        Reader cr(c, type + ".comms[" + std::to_string(i) + "]");
        CommBytes cb;
        cb.hash = cr.Hash("comm");
        cb.bytes = cr.U64("bytes");
        if (const json* peers = cr.Array("peers", kMaxPeersPerComm)) {
          for (const json& p : *peers) {
            if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
                !p[1].is_number_unsigned()) {
              cr.Fail("peers", "entries must be [rank, bytes]");
              break;
            }
            cb.peers.push_back({p[0].get<int>(), p[1].get<uint64_t>()});
          }
        }
        if (!cr.status().ok()) return cr.status();
        m.comms.push_back(std::move(cb));
      }
    }
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "stats") {
    PluginStats m;
    m.events = r.U64("events");
    m.dropped = r.U64("dropped");
    m.collectives = r.U64("collectives");
    m.sampled_windows = r.U64("sampled_windows", false);
    if (!r.status().ok()) return r.status();
    return Message(m);
  }
  if (type == "qp") {
    QpInfo m;
    m.device = r.Str("device", true, 64);
    m.port = static_cast<int>(r.Int("port", 0, 255));  // 0: not given at RTR.
    m.qpn = static_cast<uint32_t>(r.Int("qpn", 0, 0xFFFFFF));
    m.dest_qpn = static_cast<uint32_t>(r.Int("dest_qpn", 0, 0xFFFFFF));
    m.remote_gid = r.Str("remote_gid", true, 64);
    m.sport = static_cast<uint16_t>(r.Int("sport", 0, 65535));
    m.traffic_class = static_cast<int>(r.Int("traffic_class", -1, 255));
    m.pinned = r.Bool("pinned", false);
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "qp_gone") {
    QpGone m;
    m.device = r.Str("device", true, 64);
    m.qpn = static_cast<uint32_t>(r.Int("qpn", 0, 0xFFFFFF));
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "repin") {
    RepinResult m;
    m.device = r.Str("device", true, 64);
    m.qpn = static_cast<uint32_t>(r.Int("qpn", 0, 0xFFFFFF));
    m.sport = static_cast<uint16_t>(r.Int("sport", 0, 65535));
    m.ok = r.Bool("ok", false);
    m.error = r.Str("error", false, 1024);
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "pins") {
    PinTable m;
    m.job_id = r.Str("job_id", false, 128);
    m.epoch = r.U64("epoch");
    m.state_id = r.Hash("state_id");
    m.traffic_class = static_cast<int>(r.Int("traffic_class", -1, 255));
    if (const json* pins = r.Array("pins", kMaxPins)) {
      for (const json& p : *pins) {
        if (!p.is_array() || p.size() != 3 || !p[0].is_string() || !p[1].is_string() ||
            !p[2].is_number_unsigned() || p[2].get<uint64_t>() < 0xC000 ||
            p[2].get<uint64_t>() > 0xFFFF) {
          r.Fail("pins", "entries must be [device, remote_gid, sport 49152-65535]");
          break;
        }
        m.pins.push_back({p[0].get<std::string>(), p[1].get<std::string>(),
                          static_cast<uint16_t>(p[2].get<uint64_t>())});
      }
    }
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "pin_ack") {
    PinAck m;
    m.epoch = r.U64("epoch");
    m.state_id = r.Hash("state_id");
    m.ok = r.Bool("ok", false);
    m.error = r.Str("error", false, 1024);
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  if (type == "status") return Message(StatusRequest{});
  if (type == "status_reply") {
    auto it = j.find("status");
    if (it == j.end() || !it->is_object()) {
      return core::InvalidArgumentError("host message: status_reply.status: must be an object");
    }
    return Message(StatusReply{it->dump()});
  }
  if (type == "refused") {
    Refused m;
    m.job_id = r.Str("job_id", false, 128);
    m.code = r.Str("code", true, 64);
    m.reason = r.Str("reason", true, 1024);
    if (!r.status().ok()) return r.status();
    return Message(std::move(m));
  }
  return core::InvalidArgumentError("host message: unknown type '" + type + "'");
}

}  // namespace

std::string HostdSocketPath() {
  const char* p = std::getenv("CRUX_HOSTD_SOCKET");
  if (p != nullptr && *p != '\0') return p;
  return kDefaultSocketPath;
}

std::string Encode(const Message& m) {
  json j = std::visit([](const auto& body) { return EncodeBody(body); }, m);
  j["v"] = kHostProtocolVersion;
  // Strings from NCCL (communicator names) need not be UTF-8: replace, never throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

core::Result<Message> Decode(std::string_view text) {
  if (text.size() > kMaxMessageBytes) {
    return core::InvalidArgumentError("host message: " + std::to_string(text.size()) +
                                      " bytes, more than " + std::to_string(kMaxMessageBytes));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return core::InvalidArgumentError("host message: not a JSON object");
  }
  auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != kHostProtocolVersion) {
    return core::InvalidArgumentError("host message: v: must be " +
                                      std::to_string(kHostProtocolVersion));
  }
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) {
    return core::InvalidArgumentError("host message: type: missing");
  }
  try {
    return DecodeBody(j, t->get<std::string>());
  } catch (const std::exception& e) {  // nlohmann type errors on unexpected shapes.
    return core::InvalidArgumentError(std::string("host message: ") + e.what());
  }
}

core::Result<Gid> ParseGid(std::string_view text) {
  std::string s(text);
  Gid gid{};
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    gid[10] = 0xFF;
    gid[11] = 0xFF;
    std::memcpy(gid.data() + 12, &v4, 4);
    return gid;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(gid.data(), &v6, 16);
    return gid;
  }
  return core::InvalidArgumentError("'" + s + "' is not an IPv4 address or a GID / IPv6 address");
}

std::string FormatGid(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  in6_addr a{};
  std::memcpy(&a, gid.data(), 16);
  inet_ntop(AF_INET6, &a, buf, sizeof buf);
  return buf;
}

core::Result<std::string> CanonicalGid(std::string_view text) {
  CRUX_ASSIGN_OR_RETURN(Gid g, ParseGid(text));
  return FormatGid(g);
}

bool IsValidJobId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!IsJobIdChar(c)) return false;
  }
  return true;
}

}  // namespace crux::hostd
