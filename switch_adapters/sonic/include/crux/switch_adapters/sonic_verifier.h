// SonicEnforcementVerifier: checks what a SONiC switch applied against the desired state (issue
// #29; the interface and the backend-neutral rules: enforcement.h). One check reads, in pipelined
// round trips on the switch's local Redis:
//
//   COUNTERS_DB (2)  the name maps (counters_db.h; shared with the port monitor): port -> port
//                    VID, port:<n> -> queue VID, queue VID -> SAI queue index and type
//   ASIC_DB (1)      ASIC_STATE:SAI_OBJECT_TYPE_PORT:<port vid>: the maps bound to the port
//                    (SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP, SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP)
//                    ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:<map vid>: their type and entries
//                    (asic_db_schema.h)
//   COUNTERS_DB (2)  COUNTERS:<queue vid> SAI_QUEUE_STAT_PACKETS of every unicast queue of the
//                    watched ports (flex counter group QUEUE)
//
// and gives, in this order of precedence:
//   * MISMATCH with the first map difference: a port binding no map, a map object missing from
//     ASIC_DB or of the wrong type, an entry that differs from the plan (FirstMapDifference);
//   * UNKNOWN when a port is not in COUNTERS_PORT_NAME_MAP or ASIC_DB yet (orchagent has not
//     created it); an error (kFailedPrecondition, naming the key and field) when a row cannot be
//     interpreted (a garbled SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST, a port attribute that is not an
//     object id), unless another port already showed a definite mismatch;
//   * with the maps matching: the traffic rules (QueueTrafficJudge); a queue counter that cannot
//     be read as a number gives UNKNOWN ("the maps match, but ...") and leaves the judge as it
//     was.
// Connection errors and timeouts are kUnavailable (RedisSession; one attempt per call).
//
// Thread-safety: not thread-safe (enforcement.h).
#ifndef CRUX_SWITCH_ADAPTERS_SONIC_VERIFIER_H_
#define CRUX_SWITCH_ADAPTERS_SONIC_VERIFIER_H_

#include <memory>
#include <string>
#include <vector>

#include "crux/switch_adapters/counters_db.h"
#include "crux/switch_adapters/enforcement.h"
#include "crux/switch_adapters/redis_session.h"

namespace crux::switch_adapters {

struct SonicVerifierOptions {
  RedisEndpoint endpoint;  // Socket or host:port and timeouts; `db` is ignored (the dbs below).
  int asic_db = 1;
  int counters_db = 2;
  std::vector<std::string> ports;  // The ports Crux programs; non-empty.
  QueueCheckOptions queues;
};

class SonicEnforcementVerifier final : public EnforcementVerifier {
 public:
  // Errors name the field ("sonic.ports: must not be empty", "--verify-silent-pps: ...").
  static core::Result<std::unique_ptr<SonicEnforcementVerifier>> Create(
      SonicVerifierOptions options);

  core::Result<core::EnforcementCheck> Verify(const EnforcementPlan& plan,
                                              core::Duration now) override;

 private:
  explicit SonicEnforcementVerifier(SonicVerifierOptions options);
  // The map half of a check (see the file comment for the precedence).
  struct MapVerdict {
    std::string unknown;     // Why the maps cannot be checked yet; "" when they could.
    std::string difference;  // The first difference; "" when every map matches.
    uint32_t maps_checked = 0;
  };
  core::Result<MapVerdict> CheckMaps(const core::SwitchQosState& desired);
  // The unicast queues' packet counters of every port with queue counters.
  core::Result<std::vector<QueueCounterReading>> ReadQueueCounters();

  SonicVerifierOptions options_;
  RedisSession asic_;
  RedisSession counters_;
  CountersNameMapCache names_;
  QueueTrafficJudge judge_;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_SONIC_VERIFIER_H_
