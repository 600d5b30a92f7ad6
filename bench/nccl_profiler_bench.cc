// Hot-path cost of the NCCL profiler plugin (issue #17 goal: <= 100 ns per event). One
// "collective" is what NCCL calls for an all-reduce on 2 channels with the default mask
// (Coll | P2p | KernelCh): Coll start, Coll stop, and per channel KernelCh start,
// recordEventState(KernelChStop), KernelCh stop = 8 calls. Time per event = time per
// collective / 8 (counter `ns_per_event`).
//
//   BM_RecorderCollective        the Recorder alone, queue drained between batches (untimed):
//                                every push succeeds.
//   BM_PluginCollective          through the exported ncclProfiler_v6 table of the built
//                                libnccl-profiler-crux.so (dlopen, as NCCL), with its background
//                                thread draining; batches of 512 collectives (2,560 records of
//                                65,536 slots) with an untimed pause for the drain between them,
//                                so every push succeeds.
//   BM_PluginCollectiveSaturated as above without pauses: the producer outruns the consumer and
//                                most pushes hit the full-queue path.
//   BM_ProxyStepSend             a sampled network step (start, SendWait state, stop).
//   BM_CollStart                 the costliest single call: Coll start (steady-clock read, id,
//                                push), queue drained between batches.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "crux/nccl_profiler/abi.h"
#include "recorder.h"

namespace {

namespace abi = crux::nccl_profiler::abi;
using crux::nccl_profiler::Record;
using crux::nccl_profiler::Recorder;

constexpr int kChannels = 2;
constexpr int kEventsPerCollective = 2 + 3 * kChannels;

abi::EventDescrV6 CollDescr() {
  abi::EventDescrV6 d{};
  d.type = abi::kColl;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclFloat32";
  d.coll.count = 6'250'000;
  d.coll.nChannels = kChannels;
  return d;
}

// The descriptors NCCL passes for one collective (built once, reused).
struct Collective {
  Collective() {
    kernel.type = abi::kKernelCh;
    kernel.kernelCh.pTimer = 1;
    args.kernelCh.pTimer = 2;
  }
  abi::EventDescrV6 coll = CollDescr();
  abi::EventDescrV6 kernel{};
  abi::StateArgsV6 args{};

  template <typename StartFn, typename StateFn, typename StopFn>
  void Run(void* ctx, StartFn start, StateFn state, StopFn stop) {
    void* h = nullptr;
    start(ctx, &h, &coll);
    stop(h);
    kernel.parentObj = h;
    for (int ch = 0; ch < kChannels; ++ch) {
      void* k = nullptr;
      start(ctx, &k, &kernel);
      state(k, abi::kKernelChStop, &args);
      stop(k);
    }
  }
};

void BM_RecorderCollective(benchmark::State& state) {
  Recorder rec(1 << 16);
  int comm = 0;
  Collective c;
  constexpr int kBatch = 1024;  // 5 records each: 5120 of 65536 slots.
  int64_t collectives = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      c.Run(
          &comm, [&](void* x, void** h, abi::EventDescrV6* d) { return rec.StartEvent(x, h, d); },
          [&](void* h, abi::EventState s, abi::StateArgsV6* a) { return rec.RecordState(h, s, a); },
          [&](void* h) { return rec.StopEvent(h); });
    }
    collectives += kBatch;
    state.PauseTiming();
    for (Record r; rec.Pop(&r);) {
    }
    state.ResumeTiming();
  }
  state.counters["ns_per_event"] =
      benchmark::Counter(static_cast<double>(collectives * kEventsPerCollective),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["dropped"] = static_cast<double>(rec.dropped());
}
BENCHMARK(BM_RecorderCollective)->Unit(benchmark::kMicrosecond);

void BM_CollStart(benchmark::State& state) {
  Recorder rec(1 << 16);
  int comm = 0;
  abi::EventDescrV6 coll = CollDescr();
  constexpr int kBatch = 8192;
  int64_t calls = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      void* h = nullptr;
      rec.StartEvent(&comm, &h, &coll);
      benchmark::DoNotOptimize(h);
    }
    calls += kBatch;
    state.PauseTiming();
    for (Record r; rec.Pop(&r);) {
    }
    state.ResumeTiming();
  }
  state.counters["ns_per_event"] = benchmark::Counter(
      static_cast<double>(calls), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CollStart)->Unit(benchmark::kMicrosecond);

void BM_ProxyStepSend(benchmark::State& state) {
  Recorder rec(1 << 16);
  int comm = 0;
  abi::EventDescrV6 op{};
  op.type = abi::kProxyOp;
  op.proxyOp.isSend = 1;
  void* oh = nullptr;
  rec.StartEvent(&comm, &oh, &op);
  abi::EventDescrV6 step{};
  step.type = abi::kProxyStep;
  step.parentObj = oh;
  abi::StateArgsV6 args{};
  args.proxyStep.transSize = 1 << 20;
  constexpr int kBatch = 4096;
  int64_t steps = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      void* h = nullptr;
      rec.StartEvent(&comm, &h, &step);
      rec.RecordState(h, abi::kProxyStepSendWait, &args);
      rec.StopEvent(h);
    }
    steps += kBatch;
    state.PauseTiming();
    for (Record r; rec.Pop(&r);) {
    }
    state.ResumeTiming();
  }
  state.counters["ns_per_event"] = benchmark::Counter(
      static_cast<double>(steps * 3), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ProxyStepSend)->Unit(benchmark::kMicrosecond);

struct LoadedPlugin {
  LoadedPlugin() {
    setenv("CRUX_HOSTD_SOCKET", "/nonexistent/crux-bench.sock", 1);
    setenv("CRUX_NCCL_SAMPLE_EVERY_MS", "0", 1);
    lib = dlopen(CRUX_NCCL_PROFILER_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    table = static_cast<abi::ProfilerV6*>(dlsym(lib, "ncclProfiler_v6"));
    if (table == nullptr || table->init(&ctx, 0x5eed, &mask, "bench", 1, 2, 0, nullptr) != 0) {
      table = nullptr;
    }
  }
  ~LoadedPlugin() {
    if (table != nullptr) table->finalize(ctx);
    if (lib != nullptr) dlclose(lib);
  }
  void* lib = nullptr;
  abi::ProfilerV6* table = nullptr;
  void* ctx = nullptr;
  int mask = 0;
};

void RunPlugin(benchmark::State& state, bool pause_for_drain) {
  LoadedPlugin p;
  if (p.table == nullptr) {
    state.SkipWithError("cannot load " CRUX_NCCL_PROFILER_PLUGIN);
    return;
  }
  Collective c;
  constexpr int kBatch = 512;
  int64_t collectives = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      c.Run(p.ctx, p.table->startEvent, p.table->recordEventState, p.table->stopEvent);
    }
    collectives += kBatch;
    if (pause_for_drain) {
      state.PauseTiming();
      std::this_thread::sleep_for(std::chrono::milliseconds(25));  // Two drain cycles.
      state.ResumeTiming();
    }
  }
  state.counters["ns_per_event"] =
      benchmark::Counter(static_cast<double>(collectives * kEventsPerCollective),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_PluginCollective(benchmark::State& state) { RunPlugin(state, true); }
BENCHMARK(BM_PluginCollective)->Unit(benchmark::kMicrosecond)->Iterations(200);

void BM_PluginCollectiveSaturated(benchmark::State& state) { RunPlugin(state, false); }
BENCHMARK(BM_PluginCollectiveSaturated)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
