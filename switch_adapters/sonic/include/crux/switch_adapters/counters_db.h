// CountersDb: what the sonic port monitor (sonic_port_monitor.h) and the enforcement verifier
// (sonic_verifier.h) share to read SONiC's COUNTERS_DB (Redis db 2): the name maps orchagent's
// portsorch writes (sonic-swss orchagent/portsorch.cpp, generateQueueMapPerPort and the port
// counter maps) and the parsing of counter values.
//
//   COUNTERS_PORT_NAME_MAP     <port> -> port VID ("Ethernet0" -> "oid:0x1000000000002")
//   COUNTERS_QUEUE_NAME_MAP    <port>:<n> -> queue VID; n is the queue's position in the port's
//                              queue list (unicast and multicast queues both listed)
//   COUNTERS_QUEUE_INDEX_MAP   queue VID -> SAI_QUEUE_ATTR_INDEX (the index a TC_TO_QUEUE map
//                              names); absent on old images or for queues without counters
//   COUNTERS_QUEUE_TYPE_MAP    queue VID -> "SAI_QUEUE_TYPE_UNICAST" | "..._MULTICAST" | "..._ALL"
//   COUNTERS:<vid>             the counters of a port or queue (flex counters; decimal strings)
//
// Thread-safety: CountersNameMapCache is not thread-safe (one owner); the functions are pure.
#ifndef CRUX_SWITCH_ADAPTERS_COUNTERS_DB_H_
#define CRUX_SWITCH_ADAPTERS_COUNTERS_DB_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/switch_adapters/redis_session.h"

namespace crux::switch_adapters {

// One queue of a port in COUNTERS_QUEUE_NAME_MAP.
struct CounterQueue {
  int position = 0;          // <n> of "<port>:<n>".
  std::string oid;           // Its counters: COUNTERS:<oid>.
  std::optional<int> index;  // COUNTERS_QUEUE_INDEX_MAP; nullopt: not there.
  std::string type;          // COUNTERS_QUEUE_TYPE_MAP; "" when not there.

  // The SAI queue index: COUNTERS_QUEUE_INDEX_MAP, else the position.
  int Index() const { return index.value_or(position); }
  // Egress unicast traffic (the queues a TC_TO_QUEUE map steers): UNICAST, ALL, or untyped.
  bool Unicast() const {
    return type.empty() || type == "SAI_QUEUE_TYPE_UNICAST" || type == "SAI_QUEUE_TYPE_ALL";
  }

  friend bool operator==(const CounterQueue&, const CounterQueue&) = default;
};

struct CountersNameMaps {
  std::map<std::string, std::string> port_oid;              // Port -> VID.
  std::map<std::string, std::vector<CounterQueue>> queues;  // Port -> queues by position.

  friend bool operator==(const CountersNameMaps&, const CountersNameMaps&) = default;
};

// The maps from the four hashes (HGETALL as field -> value). Names without ":<n>" or with a
// non-numeric <n>, and index values that are not numbers, are skipped (orchagent writes neither).
CountersNameMaps ParseCountersNameMaps(const std::map<std::string, std::string>& port_map,
                                       const std::map<std::string, std::string>& queue_map,
                                       const std::map<std::string, std::string>& index_map,
                                       const std::map<std::string, std::string>& type_map);

// HGETALL's flat reply as a map.
std::map<std::string, std::string> HashOf(const RedisReply& r);
// kFailedPrecondition "<what>: <error>" for a Redis error reply; OK otherwise.
core::Status ErrorReply(const RedisReply& r, const std::string& what);
// A counter value: a decimal string; nil (absent) is 0. Anything else is kFailedPrecondition
// naming the key and field ("COUNTERS_DB COUNTERS:oid:0x15 SAI_QUEUE_STAT_PACKETS: 'x' is not a
// counter").
core::Result<uint64_t> ParseCounter(const RedisReply& r, const std::string& key,
                                    const std::string& field);

// The name maps of one COUNTERS_DB, read once and again when a watched port is missing from them,
// every kQueuesRetry uses while a watched port has no queues in them (portsorch writes the queue
// maps after the port map, when the QUEUE counters are set up, one port's queues at once), and
// every `refresh_every` uses (orchagent rebuilds them, with new VIDs, after a restart).
class CountersNameMapCache {
 public:
  static constexpr int kQueuesRetry = 5;

  explicit CountersNameMapCache(int refresh_every = 60) : refresh_every_(refresh_every) {}
  // Re-reads the maps (one pipelined round trip) when due for `ports`. One attempt.
  core::Status EnsureFresh(RedisSession& counters, const std::vector<std::string>& ports);
  core::Status Refresh(RedisSession& counters);
  const CountersNameMaps& maps() const { return maps_; }

 private:
  int refresh_every_;
  int uses_since_refresh_ = 0;
  bool loaded_ = false;
  CountersNameMaps maps_;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_COUNTERS_DB_H_
