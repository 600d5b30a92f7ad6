#include "crux/protocol/convert.h"

#include <algorithm>

namespace crux::protocol {

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_REGISTERED:
      return "registered";
    case v1::JOB_STATE_PROFILING:
      return "profiling";
    case v1::JOB_STATE_SCHEDULED:
      return "scheduled";
    case v1::JOB_STATE_GONE:
      return "gone";
    default:
      return "unspecified";
  }
}

v1::SwitchQosState SwitchQosStateToProto(const core::SwitchQosState& state, uint64_t epoch) {
  v1::SwitchQosState p;
  p.set_switch_name(state.switch_name);
  p.set_epoch(epoch);
  for (const auto& [dscp, tc] : state.dscp_to_tc) {
    (*p.mutable_dscp_to_tc())[static_cast<uint32_t>(dscp)] = static_cast<uint32_t>(tc);
  }
  for (const auto& [tc, queue] : state.tc_to_queue) {
    (*p.mutable_tc_to_queue())[static_cast<uint32_t>(tc)] = static_cast<uint32_t>(queue);
  }
  for (const core::QueueScheduler& q : state.schedulers) {
    v1::QueueScheduler* o = p.add_schedulers();
    o->set_queue(static_cast<uint32_t>(q.queue));
    o->set_type(std::string(core::SchedulerTypeName(q.type)));
    o->set_weight(static_cast<uint32_t>(q.weight));
  }
  for (int tc : state.pfc_enable) p.add_pfc_enable(static_cast<uint32_t>(tc));
  return p;
}

core::Result<core::SwitchQosState> SwitchQosStateFromProto(const v1::SwitchQosState& p) {
  core::SwitchQosState s;
  s.switch_name = p.switch_name();
  // Out-of-range values are clamped to a value validation rejects, never wrapped into range.
  auto to_int = [](uint32_t v) { return v > 1000 ? 1000 : static_cast<int>(v); };
  for (const auto& [dscp, tc] : p.dscp_to_tc()) s.dscp_to_tc[to_int(dscp)] = to_int(tc);
  for (const auto& [tc, queue] : p.tc_to_queue()) s.tc_to_queue[to_int(tc)] = to_int(queue);
  for (int i = 0; i < p.schedulers_size(); ++i) {
    const v1::QueueScheduler& q = p.schedulers(i);
    auto type = core::ParseSchedulerType(q.type());
    if (!type.ok()) {
      return core::InvalidArgumentError("switch_state.schedulers[" + std::to_string(i) +
                                        "].type: " + type.status().message());
    }
    s.schedulers.push_back({to_int(q.queue()), *type, to_int(q.weight())});
  }
  std::sort(s.schedulers.begin(), s.schedulers.end(),
            [](const auto& a, const auto& b) { return a.queue < b.queue; });
  for (uint32_t tc : p.pfc_enable()) s.pfc_enable.push_back(to_int(tc));
  std::sort(s.pfc_enable.begin(), s.pfc_enable.end());
  core::Status v = core::ValidateSwitchQosState(s);
  if (!v.ok()) return v.WithContext("switch_state");
  return s;
}

}  // namespace crux::protocol
