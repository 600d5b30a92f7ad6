#include "recorder.h"

#include <unistd.h>

namespace crux::nccl_profiler {

Recorder::Recorder(size_t capacity) : queue_(capacity), pid_(::getpid()) {}

void* Recorder::Task(void* comm, const char* func, const char* datatype, size_t count,
                     uint8_t channels, int peer, bool p2p) {
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  Record r;
  r.kind = RecordKind::kTaskStart;
  r.id = id;
  r.comm = comm;
  r.func = func;
  r.datatype = datatype;
  r.value = count;
  r.t_ns = NowNs();
  r.peer = peer;
  r.channels = channels;
  r.is_p2p = p2p ? 1 : 0;
  Push(r);
  return Encode(id, kTagTask);
}

void* Recorder::KernelStart(void* parent, uint64_t gpu_ns) {
  if (parent == nullptr || TagOf(parent) != kTagTask) return nullptr;
  Record r;
  r.kind = RecordKind::kKernelStart;
  r.id = IdOf(parent);
  r.value = gpu_ns;
  Push(r);
  return Encode(r.id, kTagKernel);
}

void* Recorder::ProxyOp(void* comm, void* parent, pid_t pid, int peer, bool is_send) {
  if (!is_send) return nullptr;  // Received bytes are the sender's; NCCL skips the steps.
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  Record r;
  r.kind = RecordKind::kProxyOpStart;
  r.id = id;
  // Under PXN the parent belongs to another process: its handle means nothing here.
  r.parent = (pid == pid_ && parent != nullptr && TagOf(parent) == kTagTask) ? IdOf(parent) : 0;
  r.comm = comm;
  r.peer = peer;
  Push(r);
  return Encode(id, kTagOpSend);
}

void* Recorder::ProxyStep(void* parent) {
  if (parent == nullptr || TagOf(parent) != kTagOpSend) return nullptr;
  return Encode(IdOf(parent), kTagStepSend);
}

abi::Result Recorder::RecordState(void* handle, abi::EventState state,
                                  const abi::StateArgsV4* args) {
  if (handle == nullptr) return abi::kInvalidArgument;
  const Tag tag = TagOf(handle);
  const bool kernel_stop = tag == kTagKernel && state == abi::kKernelChStop;
  const bool send_wait = tag == kTagStepSend && state == abi::kProxyStepSendWait;
  if (!kernel_stop && !send_wait) return abi::kSuccess;
  if (args == nullptr) return abi::kInvalidArgument;
  if (kernel_stop) {
    Record r;
    r.kind = RecordKind::kKernelStop;
    r.id = IdOf(handle);
    r.value = args->kernelCh.pTimer;
    Push(r);
  } else {
    Record r;
    r.kind = RecordKind::kSendBytes;
    r.id = IdOf(handle);
    r.value = args->proxyStep.transSize;
    Push(r);
  }
  return abi::kSuccess;
}

}  // namespace crux::nccl_profiler
