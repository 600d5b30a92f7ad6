// fake_nccl_host: a stand-in for NCCL that loads a profiler plugin the way NCCL does and drives
// it through one exported ABI version with a DDP-like job: one rank (this process) of a
// communicator, `iterations` iterations of compute followed by `buckets` all-reduces of
// `bucket_bytes` each.
//
// It is deliberately independent of the plugin's own ABI declarations: descriptors are raw byte
// buffers filled at the offsets of NCCL's headers (the figures of
// nccl_profiler/include/crux/nccl_profiler/abi.h, NCCL 2.27.3 - 2.30.7), so a plugin that read a
// wrong member would see wrong data here.
//
// What NCCL does and this program imitates:
//   * dlopen(path), dlsym("ncclProfiler_v<N>"), init once per communicator with NCCL's
//     process-wide activation mask (the plugin writes it); v4's init argument order differs.
//   * A user thread launches each collective: Group start, Coll start (v5+: coll.parentGroup is
//     the group handle, parentObj the CollApi handle, NULL when API events are off), Coll stop
//     (= enqueued), Group stop; only the events the mask asks for.
//   * A proxy thread reports the GPU side: per channel KernelCh start (pTimer = GPU start),
//     recordEventState(KernelChStop, pTimer = GPU end), stop; and, when the mask holds ProxyOp
//     (sampling windows), the ring send to the next rank when that hop leaves the node: ProxyOp
//     (isSend, peer, pid), ProxySteps with recordEventState(SendWait, transSize), stops.
//   * GPU time is virtual (globaltimer-like ns from 10^15): the iteration period is exact, so the
//     test does not depend on the machine's load; wall time only paces the loop (--pace-ms).
//   * finalize at the end (the plugin flushes its last report then).
//
// Usage: fake_nccl_host --plugin PATH --abi v4|v5|v6 --rank R --nranks N --nnodes M
//          [--comm-hash 0x..] [--iterations 10] [--period-ms 100] [--buckets 4]
//          [--bucket-bytes 25000000] [--channels 2] [--pace-ms 5] [--linger-ms 0]
//          [--p2p-peer P]   (also one ncclSend of bucket_bytes to P per iteration)
// Exit: 0, 2 (bad usage), 3 (plugin missing or init failed).
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// Bits and states (NCCL's nccl_profiler.h values).
constexpr uint64_t kGroup = 1 << 0, kColl = 1 << 1, kP2p = 1 << 2, kProxyOp = 1 << 3,
                   kProxyStep = 1 << 4, kKernelCh = 1 << 6;
constexpr int kStateSendWait = 9, kStateKernelChStop = 22;

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
using InitV4 = int (*)(void**, int*, const char*, uint64_t, int, int, int, Logger);
using InitV5 = int (*)(void**, uint64_t, int*, const char*, int, int, int, Logger);
using Start = int (*)(void*, void**, void*);
using Stop = int (*)(void*);
using Record = int (*)(void*, int, void*);
using Finalize = int (*)(void*);

struct Table {  // name @0, init @8, start @16, stop @24, record @32, finalize @40.
  const char* name;
  void* init;
  Start start;
  Stop stop;
  Record record;
  Finalize finalize;
};

void Log(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  std::fprintf(stderr, "[nccl log %d %s:%d] ", level, file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
}

// A descriptor buffer with the documented offsets.
struct Descr {
  explicit Descr(int abi) : v4(abi == 4) { std::memset(b, 0, sizeof b); }
  template <typename T>
  void Put(size_t off, T v) {
    std::memcpy(b + off, &v, sizeof v);
  }
  void Type(uint64_t t) {
    if (v4) {
      Put<uint8_t>(0, static_cast<uint8_t>(t));
    } else {
      Put<uint64_t>(0, t);
    }
  }
  void Parent(void* p) { Put<void*>(8, p); }
  void Rank(int r) { Put<int>(16, r); }
  alignas(8) unsigned char b[112];
  bool v4;
};

struct Options {
  std::string plugin;
  int abi = 6;
  int rank = 0, nranks = 2, nnodes = 1;
  uint64_t comm_hash = 0xC0FFEE0000000001ull;
  int iterations = 10;
  int64_t period_ms = 100;
  int buckets = 4;
  uint64_t bucket_bytes = 25'000'000;
  int channels = 2;
  int pace_ms = 5;
  int linger_ms = 0;
  int p2p_peer = -1;
};

struct Launched {
  void* handle;
  int64_t gpu_start, gpu_end;
  bool proxy;  // The mask asked for proxy events at enqueue.
  uint64_t bytes;
  int peer;
};

class FakeNccl {
 public:
  FakeNccl(const Options& o, const Table* t) : o_(o), t_(t) {}

  bool Init() {
    int rc = 0;
    if (o_.abi == 4) {
      rc = reinterpret_cast<InitV4>(t_->init)(&ctx_, &mask_, "fake", o_.comm_hash, o_.nnodes,
                                              o_.nranks, o_.rank, &Log);
    } else {
      rc = reinterpret_cast<InitV5>(t_->init)(&ctx_, o_.comm_hash, &mask_, "fake", o_.nnodes,
                                              o_.nranks, o_.rank, &Log);
    }
    std::fprintf(stderr, "init rc=%d mask=0x%x\n", rc, mask_);
    return rc == 0;
  }

  void Run() {
    proxy_ = std::thread([this] { ProxyLoop(); });
    const int64_t period = o_.period_ms * 1'000'000;
    const int64_t base = 1'000'000'000'000'000;  // Virtual GPU clock.
    const int64_t comm_each = period / 4 / std::max(1, o_.buckets);
    uint64_t seq = 0;
    for (int it = 0; it < o_.iterations; ++it) {
      // Compute first (no events), then the gradient buckets back to back.
      int64_t t = base + it * period + period / 2;
      for (int b = 0; b < o_.buckets; ++b, t += comm_each) {
        LaunchColl(seq++, t, t + comm_each - 1000);
      }
      if (o_.p2p_peer >= 0) LaunchSend(t, t + comm_each / 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.pace_ms));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    proxy_.join();
    if (o_.linger_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.linger_ms));
  }

  int Finish() { return t_->finalize(ctx_); }
  int mask() const { return __atomic_load_n(&mask_, __ATOMIC_RELAXED); }

 private:
  void* StartEvent(Descr& d) {
    void* h = nullptr;
    if (t_->start(ctx_, &h, d.b) != 0) ++errors_;
    return h;
  }

  void LaunchColl(uint64_t seq, int64_t gpu_start, int64_t gpu_end) {
    const uint64_t m = static_cast<uint64_t>(mask());
    if ((m & (kGroup | kColl | kProxyOp | kProxyStep | kKernelCh)) == 0) return;
    Descr g(o_.abi);
    g.Type(kGroup);
    void* group = StartEvent(g);
    Descr c(o_.abi);
    c.Type(kColl);
    c.Rank(o_.rank);
    c.Parent(o_.abi == 4 ? group : nullptr);  // v5+: the CollApi handle (API events are off).
    const uint64_t count = o_.bucket_bytes / 4;
    c.Put<uint64_t>(24, seq);
    c.Put<const char*>(32, "AllReduce");
    c.Put<uint64_t>(56, count);
    c.Put<int>(64, 0);
    c.Put<const char*>(72, "ncclFloat32");
    c.Put<uint8_t>(80, static_cast<uint8_t>(o_.channels));
    c.Put<uint8_t>(81, 16);
    c.Put<const char*>(88, "Ring");
    c.Put<const char*>(96, "Simple");
    if (o_.abi != 4) c.Put<void*>(104, group);
    void* coll = (m & kColl) ? StartEvent(c) : nullptr;
    // Ring all-reduce: this rank sends 2 (n-1)/n S to rank + 1; through the proxy (network)
    // only when rank + 1 is on another node.
    const int next = (o_.rank + 1) % o_.nranks;
    const int per_node = std::max(1, o_.nranks / std::max(1, o_.nnodes));
    const bool inter_node = next / per_node != o_.rank / per_node;
    const uint64_t ring_bytes = o_.bucket_bytes * 2 * (o_.nranks - 1) / o_.nranks;
    Enqueue({coll, gpu_start, gpu_end, (m & kProxyOp) && inter_node, ring_bytes, next});
    if (coll != nullptr) t_->stop(coll);  // "Enqueued".
    if (group != nullptr) t_->stop(group);
  }

  void LaunchSend(int64_t gpu_start, int64_t gpu_end) {
    const uint64_t m = static_cast<uint64_t>(mask());
    if ((m & kP2p) == 0) return;
    Descr p(o_.abi);
    p.Type(kP2p);
    p.Rank(o_.rank);
    p.Put<const char*>(24, "Send");
    p.Put<const char*>(40, "ncclInt8");
    p.Put<uint64_t>(48, o_.bucket_bytes);
    p.Put<int>(56, o_.p2p_peer);
    p.Put<uint8_t>(60, 1);
    void* h = StartEvent(p);
    Enqueue({h, gpu_start, gpu_end, (m & kProxyOp) != 0, o_.bucket_bytes, o_.p2p_peer});
    if (h != nullptr) t_->stop(h);
  }

  void Enqueue(Launched l) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(l);
    }
    cv_.notify_all();
  }

  void ProxyLoop() {
    for (;;) {
      Launched l{};
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        l = queue_.front();
        queue_.pop_front();
      }
      if (l.handle == nullptr) continue;
      const int channels = std::max(1, o_.channels);
      if (l.proxy) SendProxy(l);
      for (int ch = 0; ch < channels; ++ch) {
        Descr k(o_.abi);
        k.Type(kKernelCh);
        k.Parent(l.handle);
        k.Put<uint8_t>(24, static_cast<uint8_t>(ch));
        k.Put<uint64_t>(32, static_cast<uint64_t>(l.gpu_start + ch * 1000));
        void* kh = StartEvent(k);
        if (kh == nullptr) continue;
        alignas(8) unsigned char args[8];
        uint64_t end = static_cast<uint64_t>(l.gpu_end - ch * 1000);
        std::memcpy(args, &end, 8);
        t_->record(kh, kStateKernelChStop, args);
        t_->stop(kh);
      }
    }
  }

  void SendProxy(const Launched& l) {
    Descr op(o_.abi);
    op.Type(kProxyOp);
    op.Parent(l.handle);
    op.Rank(o_.rank);
    op.Put<int>(24, static_cast<int>(getpid()));
    op.Put<uint8_t>(28, 0);
    op.Put<int>(32, l.peer);
    const uint64_t chunk = 4 << 20;
    const int steps = static_cast<int>((l.bytes + chunk - 1) / chunk);
    op.Put<int>(36, steps);
    op.Put<int>(40, static_cast<int>(chunk));
    op.Put<int>(44, 1);
    void* oh = StartEvent(op);
    if (oh == nullptr) return;
    uint64_t left = l.bytes;
    for (int s = 0; s < steps; ++s) {
      Descr st(o_.abi);
      st.Type(kProxyStep);
      st.Parent(oh);
      st.Put<int>(24, s);
      void* sh = StartEvent(st);
      const uint64_t n = std::min(left, chunk);
      left -= n;
      if (sh == nullptr) continue;
      alignas(8) unsigned char args[8];
      std::memcpy(args, &n, 8);
      t_->record(sh, kStateSendWait, args);
      t_->stop(sh);
    }
    t_->stop(oh);
  }

  const Options o_;
  const Table* t_;
  void* ctx_ = nullptr;
  int mask_ = 0;  // NCCL's ncclProfilerEventMask.
  std::thread proxy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Launched> queue_;
  bool done_ = false;
  std::atomic<int> errors_{0};

 public:
  int errors() const { return errors_.load(); }
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--plugin") {
      o->plugin = v;
    } else if (k == "--abi") {
      if (std::strcmp(v, "v4") == 0) {
        o->abi = 4;
      } else if (std::strcmp(v, "v5") == 0) {
        o->abi = 5;
      } else if (std::strcmp(v, "v6") == 0) {
        o->abi = 6;
      } else {
        return false;
      }
    } else if (k == "--rank") {
      o->rank = std::atoi(v);
    } else if (k == "--nranks") {
      o->nranks = std::atoi(v);
    } else if (k == "--nnodes") {
      o->nnodes = std::atoi(v);
    } else if (k == "--comm-hash") {
      o->comm_hash = std::strtoull(v, nullptr, 0);
    } else if (k == "--iterations") {
      o->iterations = std::atoi(v);
    } else if (k == "--period-ms") {
      o->period_ms = std::atoll(v);
    } else if (k == "--buckets") {
      o->buckets = std::atoi(v);
    } else if (k == "--bucket-bytes") {
      o->bucket_bytes = std::strtoull(v, nullptr, 0);
    } else if (k == "--channels") {
      o->channels = std::atoi(v);
    } else if (k == "--pace-ms") {
      o->pace_ms = std::atoi(v);
    } else if (k == "--linger-ms") {
      o->linger_ms = std::atoi(v);
    } else if (k == "--p2p-peer") {
      o->p2p_peer = std::atoi(v);
    } else {
      return false;
    }
  }
  return !o->plugin.empty() && o->nranks >= 1 && o->rank >= 0 && o->rank < o->nranks;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc % 2 == 0 || !ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr, "usage: fake_nccl_host --plugin PATH --abi v4|v5|v6 --rank R ...\n");
    return 2;
  }
  void* lib = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  const std::string sym = "ncclProfiler_v" + std::to_string(o.abi);
  auto* table = static_cast<const Table*>(dlsym(lib, sym.c_str()));
  if (table == nullptr) {
    std::fprintf(stderr, "%s not exported\n", sym.c_str());
    return 3;
  }
  std::fprintf(stderr, "loaded %s: %s\n", sym.c_str(), table->name);
  FakeNccl nccl(o, table);
  if (!nccl.Init()) return 3;
  nccl.Run();
  const int rc = nccl.Finish();
  std::printf("events_errors=%d finalize_rc=%d mask=0x%x\n", nccl.errors(), rc, nccl.mask());
  dlclose(lib);  // As NCCL does after the last communicator.
  return nccl.errors() == 0 && rc == 0 ? 0 : 1;
}
