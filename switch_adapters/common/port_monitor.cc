#include "crux/switch_adapters/port_monitor.h"

#include <array>
#include <cstdio>

#include "crux/core/base/line_rate.h"

namespace crux::switch_adapters {

PortCounterValues CounterDelta(const PortCounterValues& before, const PortCounterValues& after) {
  auto d = [](uint64_t a, uint64_t b) { return b >= a ? b - a : 0; };
  PortCounterValues out;
  out.in_errors = d(before.in_errors, after.in_errors);
  out.in_discards = d(before.in_discards, after.in_discards);
  out.out_errors = d(before.out_errors, after.out_errors);
  out.out_discards = d(before.out_discards, after.out_discards);
  out.fec_uncorrectable = d(before.fec_uncorrectable, after.fec_uncorrectable);
  out.pfc_rx_pause = d(before.pfc_rx_pause, after.pfc_rx_pause);
  out.pfc_tx_pause = d(before.pfc_tx_pause, after.pfc_tx_pause);
  out.queue_drops = d(before.queue_drops, after.queue_drops);
  out.ecn_marked = d(before.ecn_marked, after.ecn_marked);
  out.in_packets = d(before.in_packets, after.in_packets);
  out.out_packets = d(before.out_packets, after.out_packets);
  return out;
}

CounterJudgement JudgeCounters(const PortCounterValues& before, const PortCounterValues& after,
                               std::optional<core::Bandwidth> line_rate, core::Duration interval) {
  // Flex-counter poll lag of SONiC's PORT and QUEUE counter groups (see the header).
  constexpr core::Duration kPortLag = core::Duration::Millis(1000);
  constexpr core::Duration kQueueLag = core::Duration::Millis(10000);
  constexpr double kPfcPriorities = 8;
  constexpr double kIncastFanIn = 256;
  struct Field {
    const char* name;
    uint64_t PortCounterValues::*member;
    bool queue_group;
    double multiple;
  };
  static constexpr std::array<Field, 11> kFields = {{
      {"in_errors", &PortCounterValues::in_errors, false, 1},
      {"in_discards", &PortCounterValues::in_discards, false, 1},
      {"out_errors", &PortCounterValues::out_errors, false, 1},
      {"out_discards", &PortCounterValues::out_discards, false, kIncastFanIn},
      {"fec_uncorrectable", &PortCounterValues::fec_uncorrectable, false, 1},
      {"pfc_rx_pause", &PortCounterValues::pfc_rx_pause, false, kPfcPriorities},
      {"pfc_tx_pause", &PortCounterValues::pfc_tx_pause, false, kPfcPriorities},
      {"queue_drops", &PortCounterValues::queue_drops, true, kIncastFanIn},
      {"ecn_marked", &PortCounterValues::ecn_marked, true, 1},
      {"in_packets", &PortCounterValues::in_packets, false, 1},
      {"out_packets", &PortCounterValues::out_packets, false, 1},
  }};
  CounterJudgement out;
  for (const Field& f : kFields) {
    if (after.*f.member < before.*f.member) {
      out.verdict = CounterVerdict::kReset;
      out.why = std::string(f.name) + " went backwards (" + std::to_string(before.*f.member) +
                " -> " + std::to_string(after.*f.member) + "): counters were reset";
      return out;
    }
  }
  const core::Bandwidth rate =
      line_rate && line_rate->IsPositive() ? *line_rate : core::kFastestPortRate;
  for (const Field& f : kFields) {
    const uint64_t delta = after.*f.member - before.*f.member;
    const double bound = f.multiple * core::MaxFramesAtLineRate(
                                          rate, interval + (f.queue_group ? kQueueLag : kPortLag));
    if (static_cast<double>(delta) > bound) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "%s grew by %llu in %lld ms: more than a %.3g Gb/s port "
                    "can count (%.3g)",
                    f.name, static_cast<unsigned long long>(delta),
                    static_cast<long long>(interval.nanos() / 1000000), rate.ToGbps(), bound);
      out.verdict = CounterVerdict::kImplausible;
      out.why = text;
      return out;
    }
  }
  out.delta = CounterDelta(before, after);
  return out;
}

}  // namespace crux::switch_adapters
