#include "crux/switch_adapters/sonic_port_monitor.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Result;
using core::Status;

constexpr int kPriorities = 8;

RedisEndpoint WithDb(RedisEndpoint e, int db, const char* name) {
  e.db = db;
  e.name = name;
  return e;
}

// The port counter fields read per port, in this order (see PortFields()).
const std::vector<std::string>& PortFields() {
  static const std::vector<std::string> kFields = [] {
    std::vector<std::string> f = {"SAI_PORT_STAT_IF_IN_ERRORS",
                                  "SAI_PORT_STAT_IF_IN_DISCARDS",
                                  "SAI_PORT_STAT_IF_OUT_ERRORS",
                                  "SAI_PORT_STAT_IF_OUT_DISCARDS",
                                  "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES",
                                  "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
                                  "SAI_PORT_STAT_IF_OUT_UCAST_PKTS"};
    for (int p = 0; p < kPriorities; ++p) {
      f.push_back("SAI_PORT_STAT_PFC_" + std::to_string(p) + "_RX_PKTS");
    }
    for (int p = 0; p < kPriorities; ++p) {
      f.push_back("SAI_PORT_STAT_PFC_" + std::to_string(p) + "_TX_PKTS");
    }
    return f;
  }();
  return kFields;
}

// PORT_TABLE's `speed`: Mbit/s in decimal ("100000"). Anything else (absent, garbled, 0) is
// unknown: the counter checks then assume the fastest port (port_monitor.h, JudgeCounters).
std::optional<core::Bandwidth> SpeedOf(const RedisReply& r) {
  if (r.type != RedisReply::Type::kString || r.str.empty()) return std::nullopt;
  uint64_t mbps = 0;
  const char* end = r.str.data() + r.str.size();
  auto [ptr, ec] = std::from_chars(r.str.data(), end, mbps);
  constexpr uint64_t kMaxMbps = 100'000'000;  // 100 Tb/s: beyond any port.
  if (ec != std::errc() || ptr != end || mbps == 0 || mbps > kMaxMbps) return std::nullopt;
  return core::Bandwidth::BitsPerSec(static_cast<int64_t>(mbps) * 1'000'000);
}

}  // namespace

SonicPortMonitor::SonicPortMonitor(SonicMonitorOptions options)
    : options_(std::move(options)),
      appl_(WithDb(options_.endpoint, options_.appl_db, "APPL_DB")),
      counters_(WithDb(options_.endpoint, options_.counters_db, "COUNTERS_DB")),
      config_(WithDb(options_.endpoint, options_.config_db, "CONFIG_DB")) {}

Result<std::unique_ptr<SonicPortMonitor>> SonicPortMonitor::Create(SonicMonitorOptions options) {
  if (options.ports.empty()) return core::InvalidArgumentError("sonic.ports: must not be empty");
  for (int db : {options.appl_db, options.counters_db, options.config_db}) {
    if (db < 0 || db > 15) return core::InvalidArgumentError("sonic: database ids must be 0-15");
  }
  CRUX_RETURN_IF_ERROR(ValidateRedisEndpoint(options.endpoint));
  return std::unique_ptr<SonicPortMonitor>(new SonicPortMonitor(std::move(options)));
}

Result<std::vector<PortReading>> SonicPortMonitor::ReadPorts(bool with_counters) {
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& p : options_.ports) {
    cmds.push_back({"HMGET", "PORT_TABLE:" + p, "oper_status", "speed"});
  }
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> states, appl_.Pipeline(cmds, true));
  std::vector<PortReading> out;
  for (size_t i = 0; i < options_.ports.size(); ++i) {
    PortReading r;
    r.port = options_.ports[i];
    CRUX_RETURN_IF_ERROR(ErrorReply(states[i], "APPL_DB PORT_TABLE:" + r.port));
    if (states[i].elements.size() == 2) {
      const RedisReply& status = states[i].elements[0];
      if (status.type == RedisReply::Type::kString) {
        if (status.str == "up") r.oper_up = true;
        if (status.str == "down") r.oper_up = false;
      }
      r.speed = SpeedOf(states[i].elements[1]);
    }
    out.push_back(std::move(r));
  }
  if (!with_counters) return out;

  CRUX_RETURN_IF_ERROR(names_.EnsureFresh(counters_, options_.ports));
  const CountersNameMaps& names = names_.maps();
  cmds.clear();
  struct Slot {
    size_t reading;
    bool queue;
    std::string key;
  };
  std::vector<Slot> slots;
  const std::vector<std::string>& fields = PortFields();
  for (size_t i = 0; i < options_.ports.size(); ++i) {
    auto it = names.port_oid.find(options_.ports[i]);
    if (it == names.port_oid.end()) continue;
    std::vector<std::string> cmd = {"HMGET", "COUNTERS:" + it->second};
    cmd.insert(cmd.end(), fields.begin(), fields.end());
    cmds.push_back(std::move(cmd));
    slots.push_back({i, false, "COUNTERS:" + it->second});
    auto q = names.queues.find(options_.ports[i]);
    if (q == names.queues.end()) continue;
    for (const CounterQueue& queue : q->second) {  // Every queue (unicast and multicast).
      cmds.push_back({"HMGET", "COUNTERS:" + queue.oid, "SAI_QUEUE_STAT_DROPPED_PACKETS",
                      "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"});
      slots.push_back({i, true, "COUNTERS:" + queue.oid});
    }
  }
  if (cmds.empty()) return out;
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, counters_.Pipeline(cmds, true));
  for (size_t k = 0; k < slots.size(); ++k) {
    const RedisReply& r = replies[k];
    CRUX_RETURN_IF_ERROR(ErrorReply(r, "COUNTERS_DB " + slots[k].key));
    PortReading& reading = out[slots[k].reading];
    if (!slots[k].queue) {
      if (std::all_of(r.elements.begin(), r.elements.end(),
                      [](const RedisReply& e) { return e.type == RedisReply::Type::kNil; })) {
        continue;  // No counters written for this OID yet.
      }
      if (r.elements.size() != fields.size()) {
        return core::FailedPreconditionError("COUNTERS_DB " + slots[k].key +
                                             ": unexpected HMGET reply");
      }
      std::vector<uint64_t> v(fields.size());
      for (size_t f = 0; f < fields.size(); ++f) {
        CRUX_ASSIGN_OR_RETURN(v[f], ParseCounter(r.elements[f], slots[k].key, fields[f]));
      }
      PortCounterValues c;
      c.in_errors = v[0];
      c.in_discards = v[1];
      c.out_errors = v[2];
      c.out_discards = v[3];
      c.fec_uncorrectable = v[4];
      c.in_packets = v[5];
      c.out_packets = v[6];
      for (int p = 0; p < kPriorities; ++p) {
        c.pfc_rx_pause += v[7 + static_cast<size_t>(p)];
        c.pfc_tx_pause += v[7 + kPriorities + static_cast<size_t>(p)];
      }
      reading.counters = c;
    } else if (reading.counters && r.elements.size() == 2) {
      CRUX_ASSIGN_OR_RETURN(uint64_t drops, ParseCounter(r.elements[0], slots[k].key,
                                                         "SAI_QUEUE_STAT_DROPPED_PACKETS"));
      CRUX_ASSIGN_OR_RETURN(uint64_t ecn, ParseCounter(r.elements[1], slots[k].key,
                                                       "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"));
      reading.counters->queue_drops += drops;
      reading.counters->ecn_marked += ecn;
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> SonicPortMonitor::Neighbors() {
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& p : options_.ports) {
    cmds.push_back({"HGET", "DEVICE_NEIGHBOR|" + p, "name"});
  }
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> r, config_.Pipeline(cmds, true));
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < options_.ports.size(); ++i) {
    CRUX_RETURN_IF_ERROR(ErrorReply(r[i], "CONFIG_DB DEVICE_NEIGHBOR|" + options_.ports[i]));
    if (r[i].type == RedisReply::Type::kString && !r[i].str.empty()) {
      out[options_.ports[i]] = r[i].str;
    }
  }
  return out;
}

}  // namespace crux::switch_adapters
