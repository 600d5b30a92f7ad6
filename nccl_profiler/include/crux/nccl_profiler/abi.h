// The NCCL profiler plugin ABI, versions 4, 5 and 6: Crux's own declarations, written from the
// documented layout (NCCL's plugins/profiler/README.md and the profiler_vN.h headers NCCL asks
// plugins to carry). No NCCL header is included or needed: NCCL dlopens the plugin and looks up
// the exported tables `ncclProfiler_v6`, `ncclProfiler_v5`, `ncclProfiler_v4` (in that order;
// the first one found wins).
//
// Where each version comes from (first NCCL release that probes it; the layouts below did not
// change between that release and NCCL 2.30.7, checked by diffing the headers per release tag):
//   v4  NCCL 2.27.3  init(ctx, &mask, commName, commHash, nNodes, nranks, rank, logfn);
//                    `type` is uint8_t; KernelCh carries the GPU globaltimer (pTimer).
//   v5  NCCL 2.28.3  init(ctx, commId, &mask, commName, nNodes, nranks, rank, logfn);
//                    `type` is uint64_t; API events (GroupApi, CollApi, P2pApi, KernelLaunch);
//                    coll/p2p gain `parentGroup` (appended).
//   v6  NCCL 2.29.2  v5 plus copy-engine events (CeColl, CeSync, CeBatch) in the union; same
//                    function signatures; state arguments identical to v5.
// v1-v3 (NCCL 2.23-2.26) are not exported: their init carries neither the communicator hash nor
// the rank count (needed for on-wire bytes), and KernelCh has no GPU timer before v4.
//
// The layout figures asserted at the end of this file (sizes and the offset of every member the
// plugin reads) were read from NCCL 2.30.7's plugins/profiler/example/nccl/profiler_v{4,5,6}.h
// compiled for x86_64 (LP64); they hold on every LP64 target NCCL supports (x86_64, aarch64,
// ppc64le). A slip in the declarations below fails the build.
//
// Thread-safety: these are plain data declarations.
#ifndef CRUX_NCCL_PROFILER_ABI_H_
#define CRUX_NCCL_PROFILER_ABI_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace crux::nccl_profiler::abi {

// ncclResult_t (NCCL's err.h): the plugin only ever returns kSuccess from event calls; a failing
// init makes NCCL run the communicator without the profiler.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
};

// ncclDebugLogLevel / subsystem flags (NCCL's common.h), for the logger NCCL passes to init.
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};
inline constexpr unsigned long kLogSubsysInit = 1;
inline constexpr unsigned long kLogSubsysProfile = 16384;
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...);

// Event type bits (the activation mask and the descriptor's `type`).
enum EventType : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,  // v5+
  kCollApi = 1u << 9,
  kP2pApi = 1u << 10,
  kKernelLaunch = 1u << 11,
  kCeColl = 1u << 12,  // v6+
  kCeSync = 1u << 13,
  kCeBatch = 1u << 14,
};

// Event states passed to recordEventState (one enum for every version). Only the ones Crux
// reads are named.
enum EventState : int {
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,  // After isend: args->proxyStep.transSize = bytes handed to the NIC.
  kProxyStepRecvWait = 10,
  kKernelChStop = 22,  // args->kernelCh.pTimer = GPU globaltimer at the channel's end.
};

// --- Version 4 ------------------------------------------------------------------------------

struct CollDescrV4 {
  uint64_t seqNumber;  // Per communicator and per function.
  const char* func;    // "AllReduce", "AllGather", ... (static strings of libnccl).
  const void* sendBuff;
  void* recvBuff;
  size_t count;  // Elements (per rank for AllGather sends / ReduceScatter receives).
  int root;
  const char* datatype;  // "ncclFloat32", ...
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct P2pDescrV4 {
  const char* func;  // "Send" / "Recv".
  void* buff;
  const char* datatype;
  size_t count;
  int peer;  // Communicator rank of the peer.
  uint8_t nChannels;
};

struct ProxyOpDescr {  // Identical in v4-v6.
  pid_t pid;           // Process that created the parent event (PXN: may be another one).
  uint8_t channelId;
  int peer;  // Remote communicator rank.
  int nSteps;
  int chunkSize;
  int isSend;
};

struct ProxyStepDescr {
  int step;
};

struct KernelChDescr {
  uint8_t channelId;
  uint64_t pTimer;  // GPU globaltimer (ns) at the channel's start.
};

struct NetPluginDescr {
  int64_t id;
  void* data;
};

struct EventDescrV4 {
  uint8_t type;     // One EventType bit.
  void* parentObj;  // The parent's handle as returned by startEvent (or NCCL's, under PXN).
  int rank;
  union {
    CollDescrV4 coll;
    P2pDescrV4 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

union StateArgsV4 {  // Also v5 and v6.
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};
using StateArgsV5 = StateArgsV4;
using StateArgsV6 = StateArgsV4;

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// --- Version 5 ------------------------------------------------------------------------------

struct GroupApiDescr {
  bool graphCaptured;
  int groupDepth;
};
struct CollApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};
struct P2pApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};
struct KernelLaunchDescr {
  void* stream;
};

struct CollDescrV5 {  // CollDescrV4 + parentGroup.
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
};

struct P2pDescrV5 {  // P2pDescrV4 + parentGroup.
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
};

struct EventDescrV5 {
  uint64_t type;
  void* parentObj;  // v5: a Coll's parent is its CollApi event (the group is coll.parentGroup).
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// --- Version 6 ------------------------------------------------------------------------------

struct CeCollDescr {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};
struct CeSyncDescr {
  bool isComplete;
  int nRanks;
};
struct CeBatchDescr {
  int numOps;
  size_t totalBytes;
  bool useIntraSync;
};

struct EventDescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
    CeCollDescr ceColl;
    CeSyncDescr ceCollSync;
    CeBatchDescr ceCollBatch;
  };
};

struct ProfilerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV6* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgsV6* eStateArgs);
  Result (*finalize)(void* context);
};

// --- Layout guard (figures from NCCL 2.30.7's headers on x86_64; see the file comment) -------

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8 && sizeof(int) == 4 && sizeof(pid_t) == 4,
              "the NCCL profiler ABI figures below are for LP64 targets");

// v4 (NCCL 2.27.3 .. 2.30.7): descriptor 104 bytes, union at 24.
static_assert(sizeof(EventDescrV4) == 104);
static_assert(offsetof(EventDescrV4, type) == 0);
static_assert(offsetof(EventDescrV4, parentObj) == 8);
static_assert(offsetof(EventDescrV4, rank) == 16);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, seqNumber) == 24);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, func) == 32);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, count) == 56);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, datatype) == 72);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, nChannels) == 80);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollDescrV4, algo) == 88);
static_assert(offsetof(EventDescrV4, p2p) + offsetof(P2pDescrV4, func) == 24);
static_assert(offsetof(EventDescrV4, p2p) + offsetof(P2pDescrV4, datatype) == 40);
static_assert(offsetof(EventDescrV4, p2p) + offsetof(P2pDescrV4, count) == 48);
static_assert(offsetof(EventDescrV4, p2p) + offsetof(P2pDescrV4, peer) == 56);
static_assert(offsetof(EventDescrV4, p2p) + offsetof(P2pDescrV4, nChannels) == 60);
static_assert(offsetof(EventDescrV4, proxyOp) + offsetof(ProxyOpDescr, pid) == 24);
static_assert(offsetof(EventDescrV4, proxyOp) + offsetof(ProxyOpDescr, channelId) == 28);
static_assert(offsetof(EventDescrV4, proxyOp) + offsetof(ProxyOpDescr, peer) == 32);
static_assert(offsetof(EventDescrV4, proxyOp) + offsetof(ProxyOpDescr, nSteps) == 36);
static_assert(offsetof(EventDescrV4, proxyOp) + offsetof(ProxyOpDescr, isSend) == 44);
static_assert(offsetof(EventDescrV4, proxyStep) + offsetof(ProxyStepDescr, step) == 24);
static_assert(offsetof(EventDescrV4, kernelCh) + offsetof(KernelChDescr, channelId) == 24);
static_assert(offsetof(EventDescrV4, kernelCh) + offsetof(KernelChDescr, pTimer) == 32);
static_assert(sizeof(StateArgsV4) == 8);
static_assert(sizeof(ProfilerV4) == 48 && offsetof(ProfilerV4, init) == 8 &&
              offsetof(ProfilerV4, finalize) == 40);

// v5 (NCCL 2.28.3 .. 2.30.7): descriptor 112 bytes; coll.parentGroup appended at 104.
static_assert(sizeof(EventDescrV5) == 112);
static_assert(offsetof(EventDescrV5, type) == 0);
static_assert(offsetof(EventDescrV5, parentObj) == 8);
static_assert(offsetof(EventDescrV5, rank) == 16);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, seqNumber) == 24);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, func) == 32);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, count) == 56);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, datatype) == 72);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, nChannels) == 80);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollDescrV5, parentGroup) == 104);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, func) == 24);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, datatype) == 40);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, count) == 48);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, peer) == 56);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, nChannels) == 60);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pDescrV5, parentGroup) == 64);
static_assert(offsetof(EventDescrV5, proxyOp) + offsetof(ProxyOpDescr, pid) == 24);
static_assert(offsetof(EventDescrV5, proxyOp) + offsetof(ProxyOpDescr, peer) == 32);
static_assert(offsetof(EventDescrV5, proxyOp) + offsetof(ProxyOpDescr, isSend) == 44);
static_assert(offsetof(EventDescrV5, kernelCh) + offsetof(KernelChDescr, channelId) == 24);
static_assert(offsetof(EventDescrV5, kernelCh) + offsetof(KernelChDescr, pTimer) == 32);
static_assert(sizeof(ProfilerV5) == 48 && offsetof(ProfilerV5, init) == 8 &&
              offsetof(ProfilerV5, finalize) == 40);

// v6 (NCCL 2.29.2 .. 2.30.7): same size and offsets as v5 for every member read; CE members.
static_assert(sizeof(EventDescrV6) == 112);
static_assert(offsetof(EventDescrV6, type) == 0);
static_assert(offsetof(EventDescrV6, parentObj) == 8);
static_assert(offsetof(EventDescrV6, rank) == 16);
static_assert(offsetof(EventDescrV6, coll) + offsetof(CollDescrV5, count) == 56);
static_assert(offsetof(EventDescrV6, coll) + offsetof(CollDescrV5, datatype) == 72);
static_assert(offsetof(EventDescrV6, coll) + offsetof(CollDescrV5, nChannels) == 80);
static_assert(offsetof(EventDescrV6, p2p) + offsetof(P2pDescrV5, count) == 48);
static_assert(offsetof(EventDescrV6, p2p) + offsetof(P2pDescrV5, peer) == 56);
static_assert(offsetof(EventDescrV6, proxyOp) + offsetof(ProxyOpDescr, pid) == 24);
static_assert(offsetof(EventDescrV6, proxyOp) + offsetof(ProxyOpDescr, peer) == 32);
static_assert(offsetof(EventDescrV6, proxyOp) + offsetof(ProxyOpDescr, isSend) == 44);
static_assert(offsetof(EventDescrV6, kernelCh) + offsetof(KernelChDescr, pTimer) == 32);
static_assert(offsetof(EventDescrV6, ceColl) + offsetof(CeCollDescr, stream) == 104);
static_assert(offsetof(EventDescrV6, ceCollBatch) + offsetof(CeBatchDescr, totalBytes) == 32);
static_assert(sizeof(ProfilerV6) == 48 && offsetof(ProfilerV6, init) == 8 &&
              offsetof(ProfilerV6, finalize) == 40);

}  // namespace crux::nccl_profiler::abi

#endif  // CRUX_NCCL_PROFILER_ABI_H_
