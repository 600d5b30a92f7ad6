// Recorder: the plugin's hot path. NCCL calls startEvent / stopEvent / recordEventState from its
// user threads (collective and p2p launches) and its proxy threads (kernel-channel timing,
// network steps); each call turns into at most one 64-byte Record pushed on a preallocated
// lock-free queue (client_lib's BoundedQueue) and returns kSuccess (kInvalidArgument for the
// NULL arguments named at each entry point, which record nothing). It never blocks, never
// allocates, never takes a lock and never dereferences a handle: handles are opaque numbers
// ((id << 3) | tag), so an event whose parent was created in another process (PXN) or long
// ago is harmless. A full queue drops the record and counts it.
//
// What is recorded (everything else returns a NULL handle, so NCCL skips its follow-up calls):
//   Coll / P2p start        one kTaskStart (host steady-clock time, func, count, datatype,
//                           channels, peer) with a fresh id;
//   KernelCh start / stop   kKernelStart / kKernelStop with the GPU globaltimer, keyed by the
//                           parent task's id;
//   ProxyOp start (send)    kProxyOpStart (peer, parent task id when the parent is this
//                           process's) - only emitted by NCCL inside sampling windows;
//   ProxyStep SendWait      kSendBytes (transSize: the bytes handed to the NIC), keyed by op.
// stopEvent records nothing (Coll stop only means "enqueued").
//
// Thread-safety: StartEvent / StopEvent / RecordState from any number of threads; Pop from one
// consumer thread.
#ifndef CRUX_NCCL_PROFILER_SRC_RECORDER_H_
#define CRUX_NCCL_PROFILER_SRC_RECORDER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "crux/nccl_profiler/abi.h"
#include "event_ring.h"  // client_lib/src: BoundedQueue.

namespace crux::nccl_profiler {

enum class RecordKind : uint8_t {
  kTaskStart,
  kKernelStart,
  kKernelStop,
  kProxyOpStart,
  kSendBytes,
};

struct Record {
  uint64_t id = 0;             // kTaskStart / kProxyOpStart: the new event's id; else its owner's.
  uint64_t parent = 0;         // kProxyOpStart: the task's id (0: unknown or another process's).
  const void* comm = nullptr;  // The plugin's communicator context (kTaskStart, kProxyOpStart).
  const char* func = nullptr;  // kTaskStart: NCCL's static function name ("AllReduce").
  const char* datatype = nullptr;
  uint64_t value = 0;  // kTaskStart: count; kKernel*: GPU timer (ns); kSendBytes: bytes.
  int64_t t_ns = 0;    // kTaskStart: host steady-clock time (ns).
  int32_t peer = -1;   // P2p / ProxyOp: communicator rank of the peer.
  uint8_t channels = 0;
  RecordKind kind = RecordKind::kTaskStart;
  uint8_t is_p2p = 0;
  uint8_t reserved = 0;
};
static_assert(sizeof(Record) == 64, "one cache line per record");

class Recorder {
 public:
  // `capacity` records are preallocated (rounded up to a power of two).
  explicit Recorder(size_t capacity);

  // The ABI entry points, for every descriptor version (v4 has a uint8_t `type`, v5/v6 a
  // uint64_t one; the members read are at the same offsets, see abi.h).
  // Argument checks (NCCL ignores what the event calls return; a NULL handle makes it skip the
  // follow-up calls): a NULL `handle` or `d`, or a NULL `comm` (a communicator whose init failed
  // while another one holds the plugin), returns kInvalidArgument with *handle = NULL when
  // `handle` is not NULL. An unknown `type` is ignored (kSuccess, NULL handle). The descriptor's
  // strings (func, datatype) are kept as pointers: NCCL's static names.
  template <typename Descr>
  abi::Result StartEvent(void* comm, void** handle, const Descr* d) {
    if (handle == nullptr) return abi::kInvalidArgument;
    *handle = nullptr;
    if (comm == nullptr || d == nullptr) return abi::kInvalidArgument;
    switch (static_cast<uint64_t>(d->type)) {
      case abi::kColl:
        *handle =
            Task(comm, d->coll.func, d->coll.datatype, d->coll.count, d->coll.nChannels, -1, false);
        break;
      case abi::kP2p:
        *handle = Task(comm, d->p2p.func, d->p2p.datatype, d->p2p.count, d->p2p.nChannels,
                       d->p2p.peer, true);
        break;
      case abi::kKernelCh:
        *handle = KernelStart(d->parentObj, d->kernelCh.pTimer);
        break;
      case abi::kProxyOp:
        *handle =
            ProxyOp(comm, d->parentObj, d->proxyOp.pid, d->proxyOp.peer, d->proxyOp.isSend != 0);
        break;
      case abi::kProxyStep:
        *handle = ProxyStep(d->parentObj);
        break;
      default:
        break;
    }
    return abi::kSuccess;
  }
  // Nothing is recorded; a NULL handle returns kInvalidArgument, any other one kSuccess.
  abi::Result StopEvent(void* handle) {
    return handle == nullptr ? abi::kInvalidArgument : abi::kSuccess;
  }
  // kInvalidArgument for a NULL handle, and for NULL `args` with a state Crux reads them for
  // (KernelChStop on a kernel handle, SendWait on a send step); every other handle (foreign,
  // stale, not an event of ours) and state is ignored with kSuccess.
  abi::Result RecordState(void* handle, abi::EventState state, const abi::StateArgsV4* args);

  // Consumer side.
  bool Pop(Record* out) { return queue_.TryPop(out); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const { return queue_.capacity(); }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Handle encoding (exposed for tests).
  // kTagComm: the plugin's communicator contexts (plugin.cc), so that a context passed as an
  // event handle, or a handle passed as a context, names nothing.
  enum Tag : uintptr_t {
    kTagTask = 1,
    kTagKernel = 2,
    kTagOpSend = 3,
    kTagStepSend = 4,
    kTagComm = 5
  };
  static void* Encode(uint64_t id, Tag tag) {
    return reinterpret_cast<void*>(static_cast<uintptr_t>((id << 3) | tag));
  }
  static Tag TagOf(const void* h) { return static_cast<Tag>(reinterpret_cast<uintptr_t>(h) & 7); }
  static uint64_t IdOf(const void* h) { return reinterpret_cast<uintptr_t>(h) >> 3; }

 private:
  void* Task(void* comm, const char* func, const char* datatype, size_t count, uint8_t channels,
             int peer, bool p2p);
  void* KernelStart(void* parent, uint64_t gpu_ns);
  void* ProxyOp(void* comm, void* parent, pid_t pid, int peer, bool is_send);
  void* ProxyStep(void* parent);
  void Push(const Record& r) {
    if (!queue_.TryPush(r)) dropped_.fetch_add(1, std::memory_order_relaxed);
  }

  client::internal::BoundedQueue<Record> queue_;
  const pid_t pid_;
  alignas(64) std::atomic<uint64_t> next_id_{1};
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace crux::nccl_profiler

#endif  // CRUX_NCCL_PROFILER_SRC_RECORDER_H_
