// Fuzz target: the NCCL profiler plugin's exported tables (ncclProfiler_v4, _v5, _v6 from
// nccl_profiler/src/plugin.cc, compiled in; what NCCL dlopens) called the way a confused host
// could: a random sequence of init / startEvent / stopEvent / recordEventState / finalize through
// random table versions, with NULL pointers, contexts and handles from earlier calls (live,
// finalized, of another kind), fabricated ones ((id << 3) | tag numbers, pointers to foreign
// objects, small and huge numbers), inconsistent ranks, random event types and random descriptor
// bytes. The plugin never dereferences contexts or handles, so any value is fair; what is never
// fuzzed is what NCCL owns and the plugin must read: a descriptor, state arguments and the mask
// are valid memory or NULL, and the descriptor's func / datatype strings are NCCL-like static
// names or NULL (the plugin's thread reads them later). No crux-hostd: the socket path names a
// directory that does not exist, so nothing leaves the process.
//
// The plugin's background thread (started by the first communicator, joined by the last
// finalize) aggregates concurrently; every input finalizes its live communicators at the end, so
// each input starts and joins it. Sampling windows open every 1 ms, so the thread writes the
// activation mask and the Aggregator sees proxy bytes.
//
// Properties besides the sanitizers (crux::fuzz::Violated):
//   init       kSuccess with a non-NULL context exactly when the context pointer is not NULL,
//              1 <= nranks <= 2^24 and 0 <= rank < nranks (kSystemError tolerated); otherwise
//              kInvalidArgument and *context = NULL. A non-NULL mask then holds Coll|P2p|KernelCh.
//   startEvent kInvalidArgument for a NULL eHandle, eDescr or context (and *eHandle = NULL),
//              else kSuccess; a handle is never a context ((h & 7) in 1..4).
//   stopEvent  kInvalidArgument for NULL, else kSuccess.
//   recordEventState  kInvalidArgument for a NULL handle; kSuccess with state arguments.
//   finalize   kSuccess exactly for a live context of this input (then it is no longer live).
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "crux/nccl_profiler/abi.h"
#include "fuzz_util.h"

namespace abi = crux::nccl_profiler::abi;

extern "C" {
extern abi::ProfilerV4 ncclProfiler_v4;
extern abi::ProfilerV5 ncclProfiler_v5;
extern abi::ProfilerV6 ncclProfiler_v6;
}

namespace {

// NCCL's process-wide activation mask: outlives every communicator (the plugin keeps a pointer).
int g_mask = 0;
int g_foreign_object = 0;  // A pointer that is neither NULL nor anything the plugin handed out.

// NCCL's names (static strings) and a few it never sends.
const char* const kNames[] = {
    nullptr,    "",           "AllReduce",      "AllGather",   "ReduceScatter",
    "AlltoAll", "Broadcast",  "Reduce",         "Send",        "Recv",
    "SendRecv", "Gather",     "Scatter",        "ncclFloat32", "ncclBfloat16",
    "ncclInt8", "ncclUint64", "ncclFloat8e4m3", "nccl",        "ncclFloat",
    "\xff\xfe"};

constexpr uint64_t kTypes[] = {abi::kGroup,     abi::kColl,      abi::kP2p,      abi::kProxyOp,
                               abi::kProxyStep, abi::kProxyCtrl, abi::kKernelCh, abi::kNetPlugin,
                               abi::kGroupApi,  abi::kCollApi,   abi::kP2pApi,   abi::kKernelLaunch,
                               abi::kCeColl,    abi::kCeSync,    abi::kCeBatch};

constexpr int kStates[] = {abi::kProxyStepSendGpuWait, abi::kProxyStepSendWait,
                           abi::kProxyStepRecvWait, abi::kKernelChStop};

void Log(abi::LogLevel /*level*/, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
         const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);  // Checks the arguments against the format.
  va_end(ap);
}

bool IsValidInit(void** ctx, int nranks, int rank) {
  return ctx != nullptr && nranks >= 1 && nranks <= (1 << 24) && rank >= 0 && rank < nranks;
}

int PickInt(FuzzedDataProvider& fdp, int small_hi) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return fdp.ConsumeIntegralInRange<int>(-2, small_hi);
    case 1:
      return fdp.PickValueInArray({0, -1, 1, (1 << 24), (1 << 24) + 1, INT32_MAX, INT32_MIN});
    default:
      return fdp.ConsumeIntegral<int>();
  }
}

class Driver {
 public:
  explicit Driver(FuzzedDataProvider& fdp) : fdp_(fdp) {}

  void Run() {
    for (int ops = 0; ops < 400 && fdp_.remaining_bytes() > 0; ++ops) {
      const int version = fdp_.ConsumeIntegralInRange<int>(4, 6);
      switch (fdp_.ConsumeIntegralInRange<int>(0, 9)) {
        case 0:
        case 1:
          Init(version);
          break;
        case 2:
        case 3:
        case 4:
          Start(version);
          break;
        case 5:
          Stop(version);
          break;
        case 6:
        case 7:
          Record(version);
          break;
        default:
          Finalize(version, Pick());
          break;
      }
    }
    // Every communicator goes: the background thread is joined before the next input.
    while (!live_.empty()) Finalize(fdp_.ConsumeIntegralInRange<int>(4, 6), live_.back());
  }

 private:
  // A context or handle: NULL, one handed out earlier (live, finalized, of the other kind) or a
  // fabricated one.
  void* Pick() {
    switch (fdp_.ConsumeIntegralInRange<int>(0, 8)) {
      case 0:
        return nullptr;
      case 1:
      case 2:
        if (!contexts_.empty()) return contexts_[Index(contexts_.size())];
        return nullptr;
      case 3:
      case 4:
        if (!handles_.empty()) return handles_[Index(handles_.size())];
        return nullptr;
      case 5:
        return &g_foreign_object;
      case 6: {  // A plugin-like number: (id << 3) | tag, e.g. a context of an earlier input.
        const uint64_t id = fdp_.ConsumeIntegralInRange<uint64_t>(0, 4096);
        return reinterpret_cast<void*>(
            static_cast<uintptr_t>((id << 3) | fdp_.ConsumeIntegralInRange<uint64_t>(0, 7)));
      }
      case 7:
        return reinterpret_cast<void*>(
            static_cast<uintptr_t>(fdp_.ConsumeIntegralInRange<uint64_t>(0, 64)));
      default:
        return reinterpret_cast<void*>(static_cast<uintptr_t>(fdp_.ConsumeIntegral<uint64_t>()));
    }
  }
  size_t Index(size_t n) { return fdp_.ConsumeIntegralInRange<size_t>(0, n - 1); }

  void Init(int version) {
    void* out = &g_foreign_object;  // Must be overwritten.
    void** ctx = fdp_.ConsumeIntegralInRange<int>(0, 7) == 0 ? nullptr : &out;
    int* mask = fdp_.ConsumeIntegralInRange<int>(0, 5) == 0 ? nullptr : &g_mask;
    std::string own_name;
    const char* name = kNames[fdp_.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
    if (fdp_.ConsumeIntegralInRange<int>(0, 7) == 0) {  // Any bytes, any length (copied).
      own_name = fdp_.ConsumeRandomLengthString(600);
      name = own_name.c_str();
    }
    const uint64_t hash = fdp_.ConsumeIntegral<uint64_t>();
    const int nnodes = PickInt(fdp_, 8);
    const int nranks = PickInt(fdp_, 64);
    const int rank = fdp_.ConsumeBool() ? PickInt(fdp_, 64)
                                        : fdp_.ConsumeIntegralInRange<int>(0, std::max(0, nranks));
    const abi::Logger log = fdp_.ConsumeBool() ? &Log : nullptr;
    if (mask != nullptr) __atomic_store_n(mask, 0, __ATOMIC_RELAXED);
    abi::Result r = abi::kInternalError;
    if (version == 4) {
      r = ncclProfiler_v4.init(ctx, mask, name, hash, nnodes, nranks, rank, log);
    } else if (version == 5) {
      r = ncclProfiler_v5.init(ctx, hash, mask, name, nnodes, nranks, rank, log);
    } else {
      r = ncclProfiler_v6.init(ctx, hash, mask, name, nnodes, nranks, rank, log);
    }
    const bool valid = IsValidInit(ctx, nranks, rank);
    if (valid && r == abi::kSystemError) {  // No thread could start: tolerated, nothing live.
      if (out != nullptr) crux::fuzz::Violated("init failed but left a context");
      return;
    }
    if (valid != (r == abi::kSuccess)) {
      crux::fuzz::Violated("init verdict", "result " + std::to_string(r) + " for nranks " +
                                               std::to_string(nranks) + " rank " +
                                               std::to_string(rank) +
                                               (ctx == nullptr ? " NULL context pointer" : ""));
    }
    if (!valid) {
      if (r != abi::kInvalidArgument) crux::fuzz::Violated("init refusal is not kInvalidArgument");
      if (ctx != nullptr && out != nullptr) crux::fuzz::Violated("refused init left a context");
      return;
    }
    if (out == nullptr || out == &g_foreign_object) crux::fuzz::Violated("init gave no context");
    if (std::find(live_.begin(), live_.end(), out) != live_.end()) {
      crux::fuzz::Violated("init handed out a live context twice");
    }
    constexpr int kDefault = abi::kColl | abi::kP2p | abi::kKernelCh;
    if (mask != nullptr && (__atomic_load_n(mask, __ATOMIC_RELAXED) & kDefault) != kDefault) {
      crux::fuzz::Violated("init did not set the activation mask");
    }
    live_.push_back(out);
    contexts_.push_back(out);
  }

  template <typename Descr>
  void FillDescr(Descr& d) {
    // Random bytes everywhere, then the members the plugin reads as strings made NCCL-like.
    const std::vector<uint8_t> bytes = fdp_.ConsumeBytes<uint8_t>(sizeof(Descr));
    if (!bytes.empty()) std::memcpy(&d, bytes.data(), bytes.size());
    uint64_t type = 0;
    switch (fdp_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        type = 0;
        break;
      case 1:
        type = fdp_.ConsumeIntegral<uint64_t>();
        break;
      case 2:
        type = fdp_.PickValueInArray(kTypes) | fdp_.PickValueInArray(kTypes);
        break;
      default:
        type = fdp_.PickValueInArray(kTypes);
        break;
    }
    d.type = static_cast<decltype(d.type)>(type);
    d.parentObj = Pick();
    const char* func = kNames[fdp_.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
    const char* datatype = kNames[fdp_.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)];
    if (static_cast<uint64_t>(d.type) == abi::kColl) {
      d.coll.func = func;
      d.coll.datatype = datatype;
    } else if (static_cast<uint64_t>(d.type) == abi::kP2p) {
      d.p2p.func = func;
      d.p2p.datatype = datatype;
    } else if (static_cast<uint64_t>(d.type) == abi::kProxyOp && fdp_.ConsumeBool()) {
      d.proxyOp.pid = ::getpid();  // This process: the parent handle is looked at.
    }
  }

  void Start(int version) {
    void* ctx = Pick();
    void* out = &g_foreign_object;
    void** handle = fdp_.ConsumeIntegralInRange<int>(0, 7) == 0 ? nullptr : &out;
    const bool null_descr = fdp_.ConsumeIntegralInRange<int>(0, 7) == 0;
    abi::Result r = abi::kInternalError;
    if (version == 4) {
      abi::EventDescrV4 d{};
      FillDescr(d);
      r = ncclProfiler_v4.startEvent(ctx, handle, null_descr ? nullptr : &d);
    } else if (version == 5) {
      abi::EventDescrV5 d{};
      FillDescr(d);
      r = ncclProfiler_v5.startEvent(ctx, handle, null_descr ? nullptr : &d);
    } else {
      abi::EventDescrV6 d{};
      FillDescr(d);
      r = ncclProfiler_v6.startEvent(ctx, handle, null_descr ? nullptr : &d);
    }
    if (handle == nullptr || ctx == nullptr || null_descr) {
      if (r != abi::kInvalidArgument) crux::fuzz::Violated("startEvent accepted a NULL argument");
      if (handle != nullptr && out != nullptr) {
        crux::fuzz::Violated("refused startEvent left a handle");
      }
      return;
    }
    if (r != abi::kSuccess) crux::fuzz::Violated("startEvent failed", std::to_string(r));
    if (out == &g_foreign_object) crux::fuzz::Violated("startEvent did not write the handle");
    if (out != nullptr) {
      const uintptr_t tag = reinterpret_cast<uintptr_t>(out) & 7;
      if (tag < 1 || tag > 4) crux::fuzz::Violated("an event handle with a context's tag");
      handles_.push_back(out);
    }
  }

  void Stop(int version) {
    void* h = Pick();
    const abi::Result r = version == 4   ? ncclProfiler_v4.stopEvent(h)
                          : version == 5 ? ncclProfiler_v5.stopEvent(h)
                                         : ncclProfiler_v6.stopEvent(h);
    if (r != (h == nullptr ? abi::kInvalidArgument : abi::kSuccess)) {
      crux::fuzz::Violated("stopEvent verdict");
    }
  }

  void Record(int version) {
    void* h = Pick();
    const int state =
        fdp_.ConsumeBool() ? fdp_.PickValueInArray(kStates) : fdp_.ConsumeIntegral<int>();
    abi::StateArgsV4 args{};
    const uint64_t value = fdp_.ConsumeIntegral<uint64_t>();
    std::memcpy(&args, &value, sizeof(args));
    abi::StateArgsV4* a = fdp_.ConsumeIntegralInRange<int>(0, 5) == 0 ? nullptr : &args;
    const auto s = static_cast<abi::EventState>(state);
    const abi::Result r = version == 4   ? ncclProfiler_v4.recordEventState(h, s, a)
                          : version == 5 ? ncclProfiler_v5.recordEventState(h, s, a)
                                         : ncclProfiler_v6.recordEventState(h, s, a);
    if (h == nullptr && r != abi::kInvalidArgument) {
      crux::fuzz::Violated("recordEventState accepted a NULL handle");
    }
    if (h != nullptr && a != nullptr && r != abi::kSuccess) {
      crux::fuzz::Violated("recordEventState failed", std::to_string(r));
    }
  }

  void Finalize(int version, void* ctx) {
    const abi::Result r = version == 4   ? ncclProfiler_v4.finalize(ctx)
                          : version == 5 ? ncclProfiler_v5.finalize(ctx)
                                         : ncclProfiler_v6.finalize(ctx);
    auto it = std::find(live_.begin(), live_.end(), ctx);
    const bool live = ctx != nullptr && it != live_.end();
    if (live != (r == abi::kSuccess)) {
      crux::fuzz::Violated(live ? "finalize refused a live context"
                                : "finalize accepted a context that is not live");
    }
    if (!live && r != abi::kInvalidArgument) crux::fuzz::Violated("finalize refusal code");
    if (live) live_.erase(it);
  }

  FuzzedDataProvider& fdp_;
  std::vector<void*> live_;      // Contexts of this input not finalized yet.
  std::vector<void*> contexts_;  // Every context of this input (stale ones included).
  std::vector<void*> handles_;   // Every non-NULL event handle of this input.
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Before the plugin's first call (it reads these once, or when its thread starts).
  setenv("CRUX_HOSTD_SOCKET", "/nonexistent-crux-fuzz-dir/hostd.sock", 1);
  setenv("CRUX_NCCL_SAMPLE_EVERY_MS", "1", 1);
  setenv("CRUX_NCCL_SAMPLE_MS", "1", 1);
  setenv("CRUX_NCCL_QUEUE", "1024", 1);  // The smallest queue: drops happen.
  setenv("CRUX_JOB_ID", "fuzz", 1);
  unsetenv("CRUX_NCCL_PROFILER");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  Driver(fdp).Run();
  return 0;
}
