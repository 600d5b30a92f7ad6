#include "crux/switch_adapters/port_monitor.h"

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

}  // namespace crux::switch_adapters
