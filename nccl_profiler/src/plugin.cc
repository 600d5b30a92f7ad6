// libnccl-profiler-crux.so: the exported ABI tables and the process-wide state behind them.
//
// NCCL calls init once per communicator (on the thread creating it), the event functions from
// its user and proxy threads, and finalize when a communicator is destroyed; when the last
// communicator is gone it may dlclose the library. So:
//   * init registers the communicator, sets NCCL's (process-wide) activation mask to
//     Coll | P2p | KernelCh, and starts the background thread with the first communicator;
//   * the event functions go straight to the Recorder (recorder.h: no lock, no allocation);
//   * the background thread drains the Recorder every 10 ms into the Aggregator, opens sampling
//     windows (ProxyOp | ProxyStep added to the mask for CRUX_NCCL_SAMPLE_MS every
//     CRUX_NCCL_SAMPLE_EVERY_MS), resolves the job id (job_id.h) and reports to crux-hostd
//     (host_protocol.h) through a HostdLink;
//   * finalize of the last communicator stops and joins the thread (one last drain and report)
//     before returning, so nothing of ours runs when NCCL unloads the library.
// No call ever returns an error to NCCL except init when CRUX_NCCL_PROFILER=0 (documented
// opt-out: NCCL then runs without the plugin).
//
// Environment: CRUX_HOSTD_SOCKET (default /run/crux/hostd.sock), CRUX_NCCL_QUEUE (records
// queued, default 65536), CRUX_NCCL_SAMPLE_EVERY_MS (default 60000, 0 = never sample; the first
// window opens after min(that, 5 s)), CRUX_NCCL_SAMPLE_MS (window length, default 1000),
// CRUX_NCCL_PROFILER=0 (disable), and the job-id variables of job_id.h.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator.h"
#include "crux/hostd/hostd_link.h"
#include "crux/hostd/job_id.h"
#include "crux/nccl_profiler/abi.h"
#include "crux/sync/thread_annotations.h"
#include "recorder.h"

#define CRUX_NCCL_EXPORT __attribute__((visibility("default")))

namespace crux::nccl_profiler {
namespace {

using hostd::JobIdentity;
using hostd::JobIdFromCommHash;
using hostd::JobIdFromEnvironment;

constexpr int kDefaultMask = abi::kColl | abi::kP2p | abi::kKernelCh;
constexpr int kSampleMask = abi::kProxyOp | abi::kProxyStep;
constexpr int64_t kMs = 1'000'000;

int64_t EnvInt(const char* name, int64_t def, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == nullptr || *end != '\0' || x < lo || x > hi) return def;
  return x;
}

// The context NCCL keeps per communicator: a key into the Aggregator (never freed while the
// background thread may still see records naming it; see Plugin::Finalize).
struct CommContext {
  hostd::CommInfo info;
};

class Plugin {
 public:
  // Leaked on purpose: no destructor runs at exit while NCCL threads may still call in.
  static Plugin& Get() {
    static Plugin* p = new Plugin();
    return *p;
  }

  abi::Result Init(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                   int nranks, int rank, abi::Logger log, const char* abi_version)
      CRUX_EXCLUDES(mu_) {
    *context = nullptr;
    const char* off = std::getenv("CRUX_NCCL_PROFILER");
    if (off != nullptr && std::string(off) == "0") return abi::kInvalidUsage;
    auto* c = new CommContext();
    c->info.hash = hash;
    c->info.rank = rank;
    c->info.nranks = nranks > 0 ? nranks : 1;
    c->info.nnodes = nnodes > 0 ? nnodes : 1;
    c->info.name = name != nullptr ? name : "";
    if (c->info.rank < 0 || c->info.rank >= c->info.nranks) c->info.rank = 0;
    bool first = false;
    {
      MutexLock lock(&mu_);
      added_.push_back(c);
      first = live_++ == 0;
      abi_ = abi_version;
      mask_ = mask;
      if (mask != nullptr) __atomic_store_n(mask, kDefaultMask | sampling_bits_, __ATOMIC_RELAXED);
      if (first) {
        stop_ = false;
        thread_ = std::make_unique<std::thread>([this] { Run(); });
      }
    }
    if (first && log != nullptr) {
      auto env = JobIdFromEnvironment([](const char* n) { return std::getenv(n); });
      log(abi::kLogInfo, abi::kLogSubsysInit | abi::kLogSubsysProfile, __FILE__, __LINE__,
          "Crux profiler (ABI %s): job %s, reporting to %s", abi_version,
          env ? (env->id + " from " + env->source).c_str() : "id from the world communicator",
          hostd::HostdSocketPath().c_str());
    }
    *context = c;
    return abi::kSuccess;
  }

  abi::Result Finalize(void* context) CRUX_EXCLUDES(mu_) {
    if (context == nullptr) return abi::kSuccess;
    std::unique_ptr<std::thread> joinable;
    {
      MutexLock lock(&mu_);
      removed_.push_back(static_cast<CommContext*>(context));
      if (live_ > 0 && --live_ == 0) {
        stop_ = true;
        mask_ = nullptr;
        joinable = std::move(thread_);
        cv_.NotifyAll();
      }
    }
    if (joinable && joinable->joinable()) joinable->join();
    return abi::kSuccess;
  }

  Recorder& recorder() { return recorder_; }

 private:
  Plugin()
      : recorder_(static_cast<size_t>(EnvInt("CRUX_NCCL_QUEUE", 1 << 16, 1024, 1 << 24))),
        sample_every_ns_(EnvInt("CRUX_NCCL_SAMPLE_EVERY_MS", 60000, 0, 86400000) * kMs),
        sample_for_ns_(EnvInt("CRUX_NCCL_SAMPLE_MS", 1000, 1, 600000) * kMs) {
    // fork() (e.g. DataLoader workers) copies neither the background thread nor NCCL: the child
    // forgets both, and our lock is never inherited held.
    pthread_atfork(&Plugin::BeforeFork, &Plugin::AfterForkParent, &Plugin::AfterForkChild);
  }

  // The analysis cannot follow a lock taken in one fork handler and released in another.
  static void BeforeFork() CRUX_NO_THREAD_SAFETY_ANALYSIS { Get().mu_.Lock(); }
  static void AfterForkParent() CRUX_NO_THREAD_SAFETY_ANALYSIS { Get().mu_.Unlock(); }
  static void AfterForkChild() CRUX_NO_THREAD_SAFETY_ANALYSIS {
    Plugin& p = Get();
    (void)p.thread_.release();  // Not running in the child; leaked, never joined.
    p.live_ = 0;
    p.mask_ = nullptr;
    p.added_.clear();
    p.removed_.clear();
    p.mu_.Unlock();
  }

  // The background thread (owns aggregator_, link_ and the reporting state below).
  void Run() CRUX_EXCLUDES(mu_) {
    hostd::HostdLink link(hostd::HostdSocketPath());
    const auto env_job = JobIdFromEnvironment([](const char* n) { return std::getenv(n); });
    JobIdentity job = env_job.value_or(JobIdentity{});
    std::optional<hostd::RankProfile> last_profile;
    int64_t next_stats = 0;
    int64_t window_start = 0;
    int64_t next_window = Recorder::NowNs() + std::min<int64_t>(sample_every_ns_, 5000 * kMs);
    bool in_window = false;
    std::vector<CommContext*> gone;
    for (bool stopping = false; !stopping;) {
      std::vector<CommContext*> added;
      std::string abi;
      {
        MutexLock lock(&mu_);
        cv_.WaitFor(&mu_, std::chrono::milliseconds(10),
                    [this]() CRUX_REQUIRES(mu_) { return stop_; });
        stopping = stop_;
        added.swap(added_);
        gone.insert(gone.end(), removed_.begin(), removed_.end());
        removed_.clear();
        abi = abi_;
      }
      for (CommContext* c : added) aggregator_.AddComm(c, c->info);
      Record r;
      while (recorder_.Pop(&r)) aggregator_.Consume(r);
      const int64_t now = Recorder::NowNs();
      aggregator_.Expire(now);
      for (CommContext* c : gone) {  // Every record naming it has been drained.
        aggregator_.RemoveComm(c);
        delete c;
      }

      // Sampling windows: real proxy bytes per peer now and then.
      if (sample_every_ns_ > 0 && !stopping) {
        // A window's start is read after the proxy events are on and it ends before they go
        // off (the Aggregator's precondition: no task counts as sampled without them).
        if (!in_window && now >= next_window) {
          SetSampling(true);
          aggregator_.SamplingStarted(Recorder::NowNs());
          in_window = true;
          window_start = now;
        } else if (in_window && now - window_start >= sample_for_ns_) {
          aggregator_.SamplingEnded(now);
          SetSampling(false);
          in_window = false;
          next_window = now + sample_every_ns_;
        }
      }

      if (job.id.empty()) {
        if (auto world = aggregator_.WorldCommHash()) job = JobIdFromCommHash(*world);
      }
      std::optional<hostd::RankProfile> fresh;
      if (!job.id.empty()) fresh = aggregator_.TakeProfile(job.id);
      if (fresh) last_profile = fresh;

      // Reporting: the whole state on every new connection, then what changed.
      if (link.Poll(now)) {
        SendState(link, job, abi, last_profile);
      } else if (link.connected()) {
        if (!gone.empty()) {  // Their alive = false.
          for (const auto& c : aggregator_.comms()) (void)link.Send(hostd::Message(c));
        } else {
          for (CommContext* c : added) (void)link.Send(hostd::Message(c->info));
        }
        if (fresh) (void)link.Send(hostd::Message(*fresh));
      }
      if (link.connected() && (now >= next_stats || stopping)) {
        hostd::PluginStats s;
        s.events = aggregator_.records();
        s.dropped = recorder_.dropped();
        s.collectives = aggregator_.collectives();
        s.sampled_windows = aggregator_.sampled_windows();
        (void)link.Send(hostd::Message(s));
        next_stats = now + 5000 * kMs;
      }
      gone.clear();
    }
    if (in_window) SetSampling(false);
  }

  // Everything hostd needs after a (re)connection: Hello, every communicator, the last profile.
  void SendState(hostd::HostdLink& link, const JobIdentity& job, const std::string& abi,
                 const std::optional<hostd::RankProfile>& profile) {
    hostd::Hello h;
    h.role = hostd::Role::kProfiler;
    h.pid = ::getpid();
    h.job_id = job.id;
    h.job_source = job.source;
    h.abi = abi;
    h.local_slot = hostd::LocalSlotFromEnvironment([](const char* n) { return std::getenv(n); });
    if (!link.Send(hostd::Message(h)).ok()) return;
    for (const auto& c : aggregator_.comms()) {
      if (!link.Send(hostd::Message(c)).ok()) return;
    }
    if (profile) (void)link.Send(hostd::Message(*profile));
  }

  void SetSampling(bool on) CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    sampling_bits_ = on ? kSampleMask : 0;
    if (mask_ != nullptr) {
      __atomic_store_n(mask_, kDefaultMask | sampling_bits_, __ATOMIC_RELAXED);
    }
  }

  Recorder recorder_;
  const int64_t sample_every_ns_;
  const int64_t sample_for_ns_;
  Aggregator aggregator_;  // Background thread only.

  Mutex mu_;
  CondVar cv_;
  std::vector<CommContext*> added_ CRUX_GUARDED_BY(mu_);
  std::vector<CommContext*> removed_ CRUX_GUARDED_BY(mu_);
  int live_ CRUX_GUARDED_BY(mu_) = 0;
  bool stop_ CRUX_GUARDED_BY(mu_) = false;
  int* mask_ CRUX_GUARDED_BY(mu_) = nullptr;  // NCCL's process-wide activation mask.
  int sampling_bits_ CRUX_GUARDED_BY(mu_) = 0;
  std::string abi_ CRUX_GUARDED_BY(mu_);
  std::unique_ptr<std::thread> thread_ CRUX_GUARDED_BY(mu_);
};

// --- ABI adapters -----------------------------------------------------------------------------

abi::Result InitV4(void** ctx, int* mask, const char* name, uint64_t hash, int nnodes, int nranks,
                   int rank, abi::Logger log) {
  return Plugin::Get().Init(ctx, mask, name, hash, nnodes, nranks, rank, log, "v4");
}
abi::Result InitV5(void** ctx, uint64_t id, int* mask, const char* name, int nnodes, int nranks,
                   int rank, abi::Logger log) {
  return Plugin::Get().Init(ctx, mask, name, id, nnodes, nranks, rank, log, "v5");
}
abi::Result InitV6(void** ctx, uint64_t id, int* mask, const char* name, int nnodes, int nranks,
                   int rank, abi::Logger log) {
  return Plugin::Get().Init(ctx, mask, name, id, nnodes, nranks, rank, log, "v6");
}
template <typename Descr>
abi::Result Start(void* ctx, void** handle, Descr* d) {
  return Plugin::Get().recorder().StartEvent(ctx, handle, d);
}
abi::Result Stop(void* handle) { return Plugin::Get().recorder().StopEvent(handle); }
abi::Result State(void* handle, abi::EventState s, abi::StateArgsV4* args) {
  return Plugin::Get().recorder().RecordState(handle, s, args);
}
abi::Result Finalize(void* ctx) { return Plugin::Get().Finalize(ctx); }

}  // namespace
}  // namespace crux::nccl_profiler

namespace cnp = crux::nccl_profiler;

extern "C" {
CRUX_NCCL_EXPORT cnp::abi::ProfilerV6 ncclProfiler_v6 = {
    "crux", cnp::InitV6, cnp::Start<cnp::abi::EventDescrV6>, cnp::Stop, cnp::State, cnp::Finalize};
CRUX_NCCL_EXPORT cnp::abi::ProfilerV5 ncclProfiler_v5 = {
    "crux", cnp::InitV5, cnp::Start<cnp::abi::EventDescrV5>, cnp::Stop, cnp::State, cnp::Finalize};
CRUX_NCCL_EXPORT cnp::abi::ProfilerV4 ncclProfiler_v4 = {
    "crux", cnp::InitV4, cnp::Start<cnp::abi::EventDescrV4>, cnp::Stop, cnp::State, cnp::Finalize};
}
