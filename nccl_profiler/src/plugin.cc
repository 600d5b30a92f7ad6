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
// The plugin never crashes its host (issue #31 item 7): every entry point checks its pointers
// and arguments and returns kInvalidArgument (or ignores the event) instead of dereferencing
// NULL or trusting a context or handle it did not hand out. Communicator contexts, like event
// handles, are opaque numbers ((id << 3) | kTagComm, never memory), so a foreign, stale or
// twice-finalized context is recognised and refused. init fails (NCCL then runs that
// communicator without the profiler) with kInvalidArgument for a NULL context pointer, nranks
// outside [1, 2^24] or rank outside [0, nranks); kInvalidUsage when CRUX_NCCL_PROFILER=0;
// kSystemError when the background thread cannot start. NCCL ignores what the event calls
// return; recorder.h says which arguments they refuse. No exception leaves an entry point.
//
// Environment: CRUX_HOSTD_SOCKET (default /run/crux/hostd.sock), CRUX_NCCL_QUEUE (records
// queued, default 65536), CRUX_NCCL_SAMPLE_EVERY_MS (default 60000, 0 = never sample; the first
// window opens after min(that, 5 s)), CRUX_NCCL_SAMPLE_MS (window length, default 1000),
// CRUX_NCCL_PROFILER=0 (disable), and the job-id variables of job_id.h.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
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
// The host protocol's limits on a communicator (host_protocol.cc: nranks <= 2^24, name <= 256
// bytes); a longer name is cut.
constexpr int kMaxRanks = 1 << 24;
constexpr size_t kMaxCommName = 256;

int64_t EnvInt(const char* name, int64_t def, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == nullptr || *end != '\0' || x < lo || x > hi) return def;
  return x;
}

// The context NCCL keeps per communicator is an opaque number, the Aggregator's key for it:
// nothing is allocated per communicator, so nothing can be freed twice or leak.
void* CommKey(uint64_t id) { return Recorder::Encode(id, Recorder::kTagComm); }

// A communicator registered by init, for the background thread.
struct NewComm {
  const void* key = nullptr;
  hostd::CommInfo info;
};

class Plugin {
 public:
  // Leaked on purpose: no destructor runs at exit while NCCL threads may still call in.
  static Plugin& Get() {
    static Plugin* p = new Plugin();
    return *p;
  }

  // `mask` (NCCL's process-wide activation mask) and `name` may be NULL; `nnodes` outside
  // [1, nranks] is clamped into it (only crux-hostd's expected host count).
  abi::Result Init(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                   int nranks, int rank, abi::Logger log, const char* abi_version)
      CRUX_EXCLUDES(life_mu_, mu_) {
    if (context == nullptr) return abi::kInvalidArgument;
    *context = nullptr;
    const char* off = std::getenv("CRUX_NCCL_PROFILER");
    if (off != nullptr && std::strcmp(off, "0") == 0) return abi::kInvalidUsage;
    if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
      if (log != nullptr) {
        log(abi::kLogWarn, abi::kLogSubsysInit | abi::kLogSubsysProfile, __FILE__, __LINE__,
            "Crux profiler: communicator refused (rank %d of %d ranks); it runs without Crux", rank,
            nranks);
      }
      return abi::kInvalidArgument;
    }
    MutexLock life(&life_mu_);
    try {
      return Register(context, mask, name, hash, nnodes, nranks, rank, log, abi_version);
    } catch (const std::exception&) {  // Out of memory, no thread: never into NCCL's frames.
      return abi::kSystemError;
    }
  }

  // Refuses (kInvalidArgument) NULL and every context that is not a live communicator of this
  // process (foreign, already finalized), leaving the live ones untouched.
  abi::Result Finalize(void* context) CRUX_EXCLUDES(life_mu_, mu_) {
    if (context == nullptr) return abi::kInvalidArgument;
    // Held until the thread is joined: an init meanwhile (another communicator, another NCCL
    // thread) would otherwise start a second thread while this one may still run.
    MutexLock life(&life_mu_);
    std::unique_ptr<std::thread> joinable;
    {
      MutexLock lock(&mu_);
      if (live_.erase(context) == 0) return abi::kInvalidArgument;
      try {
        removed_.push_back(context);
      } catch (const std::exception&) {
        // Out of memory: the Aggregator keeps it as alive; nothing else depends on it.
      }
      if (live_.empty()) {
        stop_ = true;
        mask_ = nullptr;
        joinable = std::move(thread_);
        cv_.NotifyAll();
      }
    }
    if (joinable && joinable->joinable()) {
      try {
        joinable->join();
      } catch (const std::exception&) {
        // Only when called from the background thread itself (impossible from NCCL): leave it.
        (void)joinable.release();
      }
    }
    return abi::kSuccess;
  }

  Recorder& recorder() { return recorder_; }

 private:
  abi::Result Register(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                       int nranks, int rank, abi::Logger log, const char* abi_version)
      CRUX_REQUIRES(life_mu_) CRUX_EXCLUDES(mu_) {
    NewComm c;
    c.info.hash = hash;
    c.info.rank = rank;
    c.info.nranks = nranks;
    c.info.nnodes = std::clamp(nnodes, 1, nranks);
    if (name != nullptr) c.info.name.assign(name, strnlen(name, kMaxCommName));
    bool first = false;
    {
      MutexLock lock(&mu_);
      c.key = CommKey(next_comm_++);
      live_.insert(c.key);  // Throws before anything changed.
      try {
        added_.push_back(c);
      } catch (const std::exception&) {
        live_.erase(c.key);
        throw;
      }
      first = live_.size() == 1;
      if (first) {
        stop_ = false;
        try {
          thread_ = std::make_unique<std::thread>([this] { Run(); });
        } catch (const std::exception&) {
          added_.pop_back();
          live_.erase(c.key);
          return abi::kSystemError;
        }
      }
      abi_ = abi_version;
      if (mask != nullptr) {  // A NULL mask leaves the one NCCL gave before.
        mask_ = mask;
        __atomic_store_n(mask, kDefaultMask | sampling_bits_, __ATOMIC_RELAXED);
      }
    }
    *context = const_cast<void*>(c.key);  // Registered: from here on nothing fails.
    if (first && log != nullptr) {
      try {
        auto env = JobIdFromEnvironment([](const char* n) { return std::getenv(n); });
        log(abi::kLogInfo, abi::kLogSubsysInit | abi::kLogSubsysProfile, __FILE__, __LINE__,
            "Crux profiler (ABI %s): job %s, reporting to %s", abi_version,
            env ? (env->id + " from " + env->source).c_str() : "id from the world communicator",
            hostd::HostdSocketPath().c_str());
      } catch (const std::exception&) {  // No memory for the message: no message.
      }
    }
    return abi::kSuccess;
  }

  Plugin()
      : recorder_(static_cast<size_t>(EnvInt("CRUX_NCCL_QUEUE", 1 << 16, 1024, 1 << 24))),
        sample_every_ns_(EnvInt("CRUX_NCCL_SAMPLE_EVERY_MS", 60000, 0, 86400000) * kMs),
        sample_for_ns_(EnvInt("CRUX_NCCL_SAMPLE_MS", 1000, 1, 600000) * kMs) {
    // fork() (e.g. DataLoader workers) copies neither the background thread nor NCCL: the child
    // forgets both, and our lock is never inherited held.
    pthread_atfork(&Plugin::BeforeFork, &Plugin::AfterForkParent, &Plugin::AfterForkChild);
  }

  // The analysis cannot follow a lock taken in one fork handler and released in another.
  static void BeforeFork() CRUX_NO_THREAD_SAFETY_ANALYSIS {
    Get().life_mu_.Lock();
    Get().mu_.Lock();
  }
  static void AfterForkParent() CRUX_NO_THREAD_SAFETY_ANALYSIS {
    Get().mu_.Unlock();
    Get().life_mu_.Unlock();
  }
  static void AfterForkChild() CRUX_NO_THREAD_SAFETY_ANALYSIS {
    Plugin& p = Get();
    (void)p.thread_.release();  // Not running in the child; leaked, never joined.
    p.live_.clear();
    p.mask_ = nullptr;
    p.added_.clear();
    p.removed_.clear();
    p.mu_.Unlock();
    p.life_mu_.Unlock();
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
    std::vector<const void*> gone;
    for (bool stopping = false; !stopping;) {
      std::vector<NewComm> added;
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
      for (const NewComm& c : added) aggregator_.AddComm(c.key, c.info);
      Record r;
      while (recorder_.Pop(&r)) aggregator_.Consume(r);
      const int64_t now = Recorder::NowNs();
      aggregator_.Expire(now);
      for (const void* c : gone) aggregator_.RemoveComm(c);  // Its records are drained.

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
          for (const NewComm& c : added) (void)link.Send(hostd::Message(c.info));
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

  // Serialises init and finalize (taken before mu_; never by the event calls or the thread).
  Mutex life_mu_ CRUX_ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  CondVar cv_;
  std::vector<NewComm> added_ CRUX_GUARDED_BY(mu_);
  std::vector<const void*> removed_ CRUX_GUARDED_BY(mu_);
  std::unordered_set<const void*> live_ CRUX_GUARDED_BY(mu_);  // Contexts init handed out.
  uint64_t next_comm_ CRUX_GUARDED_BY(mu_) = 1;
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
