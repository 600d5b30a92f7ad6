#include "crux/switch_adapters/counters_db.h"

#include <algorithm>
#include <charconv>

namespace crux::switch_adapters {
namespace {

// A non-negative decimal int ("12"); nullopt otherwise.
std::optional<int> SmallInt(const std::string& s) {
  int v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end || v < 0) return std::nullopt;
  return v;
}

}  // namespace

CountersNameMaps ParseCountersNameMaps(const std::map<std::string, std::string>& port_map,
                                       const std::map<std::string, std::string>& queue_map,
                                       const std::map<std::string, std::string>& index_map,
                                       const std::map<std::string, std::string>& type_map) {
  CountersNameMaps out;
  out.port_oid = port_map;
  for (const auto& [name, oid] : queue_map) {
    const size_t colon = name.rfind(':');  // "Ethernet0:3".
    if (colon == std::string::npos || colon == 0) continue;
    const std::optional<int> position = SmallInt(name.substr(colon + 1));
    if (!position) continue;
    CounterQueue q;
    q.position = *position;
    q.oid = oid;
    if (auto it = index_map.find(oid); it != index_map.end()) q.index = SmallInt(it->second);
    if (auto it = type_map.find(oid); it != type_map.end()) q.type = it->second;
    out.queues[name.substr(0, colon)].push_back(std::move(q));
  }
  for (auto& [port, queues] : out.queues) {
    std::sort(queues.begin(), queues.end(),
              [](const CounterQueue& a, const CounterQueue& b) { return a.position < b.position; });
  }
  return out;
}

std::map<std::string, std::string> HashOf(const RedisReply& r) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    out[r.elements[i].str] = r.elements[i + 1].str;
  }
  return out;
}

core::Status ErrorReply(const RedisReply& r, const std::string& what) {
  if (r.is_error()) return core::FailedPreconditionError(what + ": " + r.str);
  return core::Status::Ok();
}

core::Result<uint64_t> ParseCounter(const RedisReply& r, const std::string& key,
                                    const std::string& field) {
  if (r.type == RedisReply::Type::kNil) return uint64_t{0};
  if (r.type != RedisReply::Type::kString) {
    return core::FailedPreconditionError("COUNTERS_DB " + key + " " + field + ": not a string");
  }
  uint64_t v = 0;
  const char* end = r.str.data() + r.str.size();
  auto [ptr, ec] = std::from_chars(r.str.data(), end, v);
  if (r.str.empty() || ec != std::errc() || ptr != end) {
    return core::FailedPreconditionError("COUNTERS_DB " + key + " " + field + ": '" + r.str +
                                         "' is not a counter");
  }
  return v;
}

core::Status CountersNameMapCache::Refresh(RedisSession& counters) {
  static const char* const kMaps[] = {"COUNTERS_PORT_NAME_MAP", "COUNTERS_QUEUE_NAME_MAP",
                                      "COUNTERS_QUEUE_INDEX_MAP", "COUNTERS_QUEUE_TYPE_MAP"};
  std::vector<std::vector<std::string>> cmds;
  for (const char* m : kMaps) cmds.push_back({"HGETALL", m});
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> r,
                        counters.Pipeline(cmds, /*replay_if_stale=*/true));
  for (size_t i = 0; i < cmds.size(); ++i) {
    CRUX_RETURN_IF_ERROR(ErrorReply(r[i], std::string("COUNTERS_DB ") + kMaps[i]));
  }
  maps_ = ParseCountersNameMaps(HashOf(r[0]), HashOf(r[1]), HashOf(r[2]), HashOf(r[3]));
  loaded_ = true;
  uses_since_refresh_ = 0;
  return core::Status::Ok();
}

core::Status CountersNameMapCache::EnsureFresh(RedisSession& counters,
                                               const std::vector<std::string>& ports) {
  const bool missing = !loaded_ || std::any_of(ports.begin(), ports.end(), [&](const auto& p) {
    return !maps_.port_oid.count(p);
  });
  // Queue maps come later than the port map (portsorch writes them when the QUEUE counters are
  // set up): a port without queues is looked for again every kQueuesRetry uses.
  const bool no_queues = std::any_of(ports.begin(), ports.end(), [&](const auto& p) {
    auto it = maps_.queues.find(p);
    return it == maps_.queues.end() || it->second.empty();
  });
  ++uses_since_refresh_;
  if (missing || uses_since_refresh_ >= refresh_every_ ||
      (no_queues && uses_since_refresh_ >= kQueuesRetry)) {
    return Refresh(counters);
  }
  return core::Status::Ok();
}

}  // namespace crux::switch_adapters
