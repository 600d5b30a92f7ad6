// Fuzz target: the client library's hot-path event stream as the background thread consumes it
// (internal::Profiler, fed by crux_client_begin_iteration ... crux_client_record_comm), without
// the thread, so every input is deterministic. Marks and comm_start/comm_end carry the library's
// own monotonic clock (a fuzzed, non-decreasing time); record_comm carries the caller's
// timestamps, which may be anything. Every profile the profiler reports is turned into the
// ProfileReport the client would send (internal::MakeProfileReport), which must pass the
// protocol's validation - otherwise the daemon would refuse every report of the job.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "crux/protocol/validate.h"
#include "event_ring.h"
#include "fuzz_util.h"
#include "profiler.h"
#include "wire.h"

namespace {

using crux::client::internal::Event;
using crux::client::internal::EventKind;

// The peer ids a caller can hold: the client drops events for ids >= max_peers (default 4096)
// before they reach the profiler.
constexpr uint32_t kMaxPeers = 4096;

void CheckReport(const crux::client::Profile& p, const std::vector<crux::client::PeerId>& index) {
  if (index.size() != p.peers.size()) crux::fuzz::Violated("peer index size");
  crux::client::Profile named = p;
  for (auto& peer : named.peers) {
    peer.local_nic = "host0/nic0";
    peer.remote_nic = "host1/nic0";
  }
  const crux::v1::ProfileReport r = crux::client::internal::MakeProfileReport("job-1", named);
  if (crux::core::Status s = crux::protocol::ValidateProfileReport(r); !s.ok()) {
    crux::fuzz::Violated("the client would send an invalid ProfileReport:", s.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  crux::client::ProfilerOptions options;
  options.window = fdp.ConsumeIntegralInRange<uint32_t>(3, 12);
  options.converge_min_iterations = fdp.ConsumeIntegralInRange<uint32_t>(2, 5);
  options.converge_max_iterations =
      fdp.ConsumeIntegralInRange<uint32_t>(options.converge_min_iterations, 12);
  options.detect_events = fdp.ConsumeIntegralInRange<uint32_t>(8, 512);
  options.detect_min_bursts = fdp.ConsumeIntegralInRange<uint32_t>(2, 6);
  const double flops = fdp.ConsumeBool() ? 0 : 1e15;
  const double peak = fdp.ConsumeBool() ? 0 : 312e12 * 16;
  crux::client::internal::Profiler profiler(options, flops, peak);

  int64_t now = fdp.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 50);  // steady_clock ns.
  while (fdp.remaining_bytes() > 0) {
    Event e;
    e.kind = static_cast<EventKind>(fdp.ConsumeIntegralInRange<int>(0, 5));
    // The library's clock moves forward by up to ~4 s per event.
    now += fdp.ConsumeIntegral<uint32_t>();
    e.t_ns = now;
    if (e.kind == EventKind::kCommStart || e.kind == EventKind::kComm) {
      e.bytes = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<uint64_t>(0, 1 << 30)
                                  : fdp.ConsumeIntegral<uint64_t>();
    }
    if (e.kind == EventKind::kCommStart || e.kind == EventKind::kCommEnd ||
        e.kind == EventKind::kComm) {
      e.peer = fdp.ConsumeIntegralInRange<uint32_t>(0, kMaxPeers - 1);
    }
    if (e.kind == EventKind::kComm) {  // Caller-given timestamps: anything.
      switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
          e.t_ns = fdp.ConsumeIntegral<int64_t>();
          e.t2_ns = fdp.ConsumeIntegral<int64_t>();
          break;
        case 1:
          e.t_ns = now - fdp.ConsumeIntegral<uint16_t>() * 1000;
          e.t2_ns = e.t_ns + fdp.ConsumeIntegral<int32_t>();
          break;
        default:
          e.t_ns = now - fdp.ConsumeIntegral<uint16_t>() * 1000;
          e.t2_ns = now;
          break;
      }
    }
    profiler.Consume(e);
    if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
      std::vector<crux::client::PeerId> index;
      if (auto report = profiler.TakeReport(&index)) CheckReport(*report, index);
    }
  }
  std::vector<crux::client::PeerId> index;
  if (auto report = profiler.TakeReport(&index)) CheckReport(*report, index);
  return 0;
}
