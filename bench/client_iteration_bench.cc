// Hot-path cost of the client library (issue #5 asks for <= 1 us per iteration mark, no
// allocation): BeginIteration/EndIteration and CommStart/CommEnd on a live Client whose
// background thread drains the ring (no daemon at the endpoint: the transport retries in the
// background, as in a fail-static period), and the raw ring. BM_IterationMark and
// BM_CommStartEnd mark back to back, far faster than the consumer drains, so most of their calls
// take the ring-full path (counted in `dropped`, same cost class); BM_IterationMarkDrained
// times only successful pushes.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <thread>

#include "crux/client/client.h"
#include "event_ring.h"

namespace {

std::unique_ptr<crux::client::Client> MakeClient() {
  crux::client::ClientOptions o;
  o.endpoint = "tcp://127.0.0.1:1";
  o.job_id = "bench";
  o.placement = {{"host0", 8, {}}, {"host1", 8, {}}};
  o.ring_capacity = 1 << 22;
  o.poll_interval_ms = 1;
  o.end_job_on_close = false;
  auto c = crux::client::Client::Start(o);
  if (!c.ok()) return nullptr;
  return std::move(*c);
}

void BM_IterationMark(benchmark::State& state) {
  auto client = MakeClient();
  if (!client) {
    state.SkipWithError("client start failed");
    return;
  }
  for (auto _ : state) {
    client->BeginIteration();
    client->EndIteration();
  }
  state.counters["dropped"] = static_cast<double>(client->Stats().events_dropped);
}
BENCHMARK(BM_IterationMark)->Threads(1)->Threads(2)->UseRealTime();

// Marks in batches of 256 iterations; between batches (untimed) the background thread drains
// the ring, so every timed call takes the successful-push path (dropped stays 0). Time per
// benchmark iteration = one BeginIteration + EndIteration pair.
void BM_IterationMarkDrained(benchmark::State& state) {
  auto client = MakeClient();
  if (!client) {
    state.SkipWithError("client start failed");
    return;
  }
  constexpr int kBatch = 256;
  uint64_t done = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) {
      client->BeginIteration();
      client->EndIteration();
    }
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count() / kBatch);
    done += kBatch;
    while (client->Stats().iterations < done) std::this_thread::yield();
  }
  state.counters["dropped"] = static_cast<double>(client->Stats().events_dropped);
}
BENCHMARK(BM_IterationMarkDrained)->UseManualTime()->Iterations(2000);

void BM_CommStartEnd(benchmark::State& state) {
  auto client = MakeClient();
  if (!client) {
    state.SkipWithError("client start failed");
    return;
  }
  auto peer = client->AddPeer("host0/nic0", "host1/nic0");
  for (auto _ : state) {
    client->CommStart(*peer, 1 << 20);
    client->CommEnd(*peer);
  }
  state.counters["dropped"] = static_cast<double>(client->Stats().events_dropped);
}
BENCHMARK(BM_CommStartEnd);

void BM_RingPushPop(benchmark::State& state) {
  crux::client::internal::EventRing ring(1024);
  crux::client::internal::Event e;
  for (auto _ : state) {
    ring.TryPush(e);
    ring.TryPop(&e);
  }
}
BENCHMARK(BM_RingPushPop);

}  // namespace

BENCHMARK_MAIN();
