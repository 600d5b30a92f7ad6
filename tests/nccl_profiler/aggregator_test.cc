// The plugin's pure parts: the hot-path Recorder (handles, what it records and drops), the
// Aggregator (bytes, GPU intervals, timeouts, sampling) and the job-id rule.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "aggregator.h"
#include "crux/hostd/job_id.h"
#include "recorder.h"

namespace crux::nccl_profiler {
namespace {

using hostd::JobIdentity;
using hostd::JobIdFromCommHash;
using hostd::JobIdFromEnvironment;
using hostd::SanitizeJobId;

TEST(WireBytesTest, FollowsTheBusFactors) {
  EXPECT_EQ(DatatypeSize("ncclFloat32"), 4u);
  EXPECT_EQ(DatatypeSize("ncclBfloat16"), 2u);
  EXPECT_EQ(DatatypeSize("ncclFloat8e4m3"), 1u);
  EXPECT_EQ(DatatypeSize("ncclUint64"), 8u);
  EXPECT_EQ(DatatypeSize("Unknown"), 0u);
  EXPECT_EQ(EstimatedWireBytes("AllReduce", 1000, 4, 8), 7000u);  // 2 * 7/8 * 4000.
  EXPECT_EQ(EstimatedWireBytes("AllGather", 1000, 4, 8), 28000u);
  EXPECT_EQ(EstimatedWireBytes("ReduceScatter", 1000, 2, 4), 6000u);
  EXPECT_EQ(EstimatedWireBytes("Broadcast", 1000, 4, 4), 3000u);
  EXPECT_EQ(EstimatedWireBytes("Send", 1000, 1, 2), 1000u);
  EXPECT_EQ(EstimatedWireBytes("Recv", 1000, 1, 2), 0u);
  EXPECT_EQ(EstimatedWireBytes("AllReduce", 1000, 4, 1), 0u);
}

TEST(JobIdTest, RuleAndSanitizing) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(JobIdFromEnvironment(get).has_value());
  env["TORCHELASTIC_RUN_ID"] = "none";
  EXPECT_FALSE(JobIdFromEnvironment(get).has_value());
  env["TORCHELASTIC_RUN_ID"] = "r1";
  EXPECT_EQ(JobIdFromEnvironment(get)->id, "torchelastic-r1");
  env["SLURM_JOB_ID"] = "77";
  EXPECT_EQ(JobIdFromEnvironment(get)->id, "slurm-77");
  env["CRUX_JOB_ID"] = "team a/job#1";
  EXPECT_EQ(*JobIdFromEnvironment(get), (JobIdentity{"team_a/job_1", "CRUX_JOB_ID"}));
  EXPECT_EQ(JobIdFromCommHash(0xabcull).id, "nccl-0000000000000abc");
  EXPECT_EQ(SanitizeJobId(std::string(300, 'x')).size(), 128u);
  EXPECT_EQ(SanitizeJobId(""), "job");
}

TEST(JobIdTest, LocalSlotFromLocalRankElseSlurmLocalId) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), -1);
  env["SLURM_LOCALID"] = "3";
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), 3);
  env["LOCAL_RANK"] = "6";
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), 6);
  env["LOCAL_RANK"] = "6x";  // Not a number: the next variable.
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), 3);
  env["SLURM_LOCALID"] = "1024";  // Out of range: not known.
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), -1);
  env["LOCAL_RANK"] = "-1";
  EXPECT_EQ(hostd::LocalSlotFromEnvironment(get), -1);
}

TEST(RecorderTest, RecordsTasksKernelsAndSendsOnly) {
  Recorder rec(16);
  int comm = 0;
  abi::EventDescrV6 d{};
  d.type = abi::kColl;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclFloat32";
  d.coll.count = 10;
  d.coll.nChannels = 2;
  void* coll = nullptr;
  EXPECT_EQ(rec.StartEvent(&comm, &coll, &d), abi::kSuccess);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(Recorder::TagOf(coll), Recorder::kTagTask);

  // Events Crux does not use get a NULL handle (NCCL then skips their follow-up calls).
  for (uint64_t t : {abi::kGroup, abi::kGroupApi, abi::kCollApi, abi::kProxyCtrl, abi::kCeColl}) {
    abi::EventDescrV6 o{};
    o.type = t;
    void* h = reinterpret_cast<void*>(1);
    EXPECT_EQ(rec.StartEvent(&comm, &h, &o), abi::kSuccess);
    EXPECT_EQ(h, nullptr) << t;
  }

  abi::EventDescrV6 k{};
  k.type = abi::kKernelCh;
  k.parentObj = coll;
  k.kernelCh.pTimer = 1000;
  void* kh = nullptr;
  rec.StartEvent(&comm, &kh, &k);
  ASSERT_NE(kh, nullptr);
  abi::StateArgsV6 args{};
  args.kernelCh.pTimer = 5000;
  EXPECT_EQ(rec.RecordState(kh, abi::kKernelChStop, &args), abi::kSuccess);
  EXPECT_EQ(rec.StopEvent(kh), abi::kSuccess);
  // No arguments for a state that needs them: refused, nothing recorded.
  EXPECT_EQ(rec.RecordState(kh, abi::kKernelChStop, nullptr), abi::kInvalidArgument);

  // A receive op is not followed; a send op's steps report their bytes.
  abi::EventDescrV6 op{};
  op.type = abi::kProxyOp;
  op.parentObj = coll;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.peer = 3;
  op.proxyOp.isSend = 0;
  void* oh = reinterpret_cast<void*>(1);
  rec.StartEvent(&comm, &oh, &op);
  EXPECT_EQ(oh, nullptr);
  op.proxyOp.isSend = 1;
  rec.StartEvent(&comm, &oh, &op);
  ASSERT_NE(oh, nullptr);
  abi::EventDescrV6 st{};
  st.type = abi::kProxyStep;
  st.parentObj = oh;
  void* sh = nullptr;
  rec.StartEvent(&comm, &sh, &st);
  ASSERT_NE(sh, nullptr);
  args.proxyStep.transSize = 4096;
  rec.RecordState(sh, abi::kProxyStepSendGpuWait, &args);  // Not the bytes-handed-over state.
  rec.RecordState(sh, abi::kProxyStepSendWait, &args);

  std::vector<Record> got;
  for (Record r; rec.Pop(&r);) got.push_back(r);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].kind, RecordKind::kTaskStart);
  EXPECT_EQ(got[0].value, 10u);
  EXPECT_EQ(got[0].channels, 2);
  EXPECT_EQ(got[1].kind, RecordKind::kKernelStart);
  EXPECT_EQ(got[1].id, got[0].id);
  EXPECT_EQ(got[2].kind, RecordKind::kKernelStop);
  EXPECT_EQ(got[2].value, 5000u);
  EXPECT_EQ(got[3].kind, RecordKind::kProxyOpStart);
  EXPECT_EQ(got[3].parent, got[0].id);
  EXPECT_EQ(got[3].peer, 3);
  EXPECT_EQ(got[4].kind, RecordKind::kSendBytes);
  EXPECT_EQ(got[4].id, got[3].id);
  EXPECT_EQ(got[4].value, 4096u);
}

TEST(RecorderTest, ForeignParentsAreNeverTrustedAndAFullQueueDrops) {
  Recorder rec(2);
  int comm = 0;
  abi::EventDescrV4 op{};
  op.type = static_cast<uint8_t>(abi::kProxyOp);
  op.parentObj = Recorder::Encode(99, Recorder::kTagTask);
  op.proxyOp.pid = ::getpid() + 1;  // PXN: the parent lives in another process.
  op.proxyOp.isSend = 1;
  void* h = nullptr;
  rec.StartEvent(&comm, &h, &op);
  Record r;
  ASSERT_TRUE(rec.Pop(&r));
  EXPECT_EQ(r.parent, 0u);
  // A KernelCh whose parent is not a task handle is ignored.
  abi::EventDescrV4 k{};
  k.type = static_cast<uint8_t>(abi::kKernelCh);
  k.parentObj = reinterpret_cast<void*>(0x1234560);
  rec.StartEvent(&comm, &h, &k);
  EXPECT_EQ(h, nullptr);
  abi::EventDescrV4 c{};
  c.type = static_cast<uint8_t>(abi::kColl);
  for (int i = 0; i < 5; ++i) rec.StartEvent(&comm, &h, &c);
  EXPECT_EQ(rec.dropped(), 3u);
}

Record Task(uint64_t id, const void* comm, int64_t host_ns, uint64_t count, uint8_t channels = 1,
            const char* func = "AllReduce") {
  Record r;
  r.kind = RecordKind::kTaskStart;
  r.id = id;
  r.comm = comm;
  r.func = func;
  r.datatype = "ncclFloat32";
  r.value = count;
  r.t_ns = host_ns;
  r.channels = channels;
  return r;
}
Record Kernel(RecordKind kind, uint64_t id, uint64_t gpu) {
  Record r;
  r.kind = kind;
  r.id = id;
  r.value = gpu;
  return r;
}

TEST(AggregatorTest, TimedOutTasksStillCountAndLateKernelEventsAreOrphans) {
  AggregatorOptions o;
  o.task_timeout_ns = 1000;
  Aggregator agg(o);
  int comm = 0;
  agg.AddComm(&comm, {0x11, 0, 2, 1, "", true});
  agg.Consume(Task(1, &comm, 100, 1000, 4));
  agg.Consume(Kernel(RecordKind::kKernelStart, 1, 5000));
  agg.Consume(Kernel(RecordKind::kKernelStop, 1, 6000));  // 1 of 4 channels.
  EXPECT_EQ(agg.collectives(), 0u);
  agg.Expire(500);
  EXPECT_EQ(agg.collectives(), 0u);
  agg.Expire(1200);
  EXPECT_EQ(agg.collectives(), 1u);
  agg.Consume(Kernel(RecordKind::kKernelStop, 1, 7000));
  EXPECT_EQ(agg.orphan_records(), 1u);
  // Records naming an unknown communicator are orphans too.
  int other = 0;
  agg.Consume(Task(2, &other, 100, 10));
  EXPECT_EQ(agg.orphan_records(), 2u);
}

TEST(AggregatorTest, WorldCommIsTheLargest) {
  Aggregator agg;
  int a = 0, b = 0, c = 0;
  EXPECT_FALSE(agg.WorldCommHash().has_value());
  agg.AddComm(&a, {0xA, 0, 8, 1, "tp", true});
  agg.AddComm(&b, {0xB, 3, 64, 8, "world", true});
  agg.AddComm(&c, {0xC, 3, 64, 8, "dp", true});
  EXPECT_EQ(agg.WorldCommHash(), 0xBu);
  agg.RemoveComm(&b);
  EXPECT_EQ(agg.WorldCommHash(), 0xBu);  // Still the job's world communicator.
  EXPECT_FALSE(agg.comms()[1].alive);
}

// Periodic all-reduces on the GPU timeline: a converged profile after a few iterations.
TEST(AggregatorTest, DetectsThePeriodFromKernelTimes) {
  Aggregator agg;
  int comm = 0;
  agg.AddComm(&comm, {0x77, 0, 4, 2, "", true});
  const int64_t period = 50'000'000;
  uint64_t id = 1;
  std::optional<hostd::RankProfile> p;
  int iterations = 0;
  for (; iterations < 12 && !p; ++iterations) {
    for (int b = 0; b < 3; ++b, ++id) {
      const int64_t g = 1'000'000'000'000 + iterations * period + 30'000'000 + b * 4'000'000;
      agg.Consume(Task(id, &comm, 10 + iterations * 1000 + b, 1'000'000));
      agg.Consume(Kernel(RecordKind::kKernelStart, id, g));
      agg.Consume(Kernel(RecordKind::kKernelStop, id, g + 3'000'000));
    }
    p = agg.TakeProfile("j");
  }
  ASSERT_TRUE(p.has_value());
  EXPECT_LE(iterations, 10);
  EXPECT_EQ(p->job_id, "j");
  EXPECT_NEAR(static_cast<double>(p->period_ns), 50e6, 0.5e6);
  ASSERT_EQ(p->comms.size(), 1u);
  EXPECT_EQ(p->comms[0].bytes, 3u * 6'000'000u);             // 3 x 2 (3/4) x 4 MB.
  EXPECT_NEAR(static_cast<double>(p->comm_ns), 9e6, 0.5e6);  // [30, 41] ms less two 1 ms gaps.
  EXPECT_FALSE(agg.TakeProfile("j").has_value());            // Nothing new.
}

// Sampling: the real / estimated ratio is taken over the tasks whose sends NCCL reported, plus
// those a window covered for their whole life without any (intra-node only). A task straddling
// a window's end without proxy ops - its sends fell after the window - is left out instead of
// lowering the ratio (it used to count its estimate and none of its bytes).
TEST(AggregatorTest, SamplingWindowEdgesBiasNeitherWay) {
  Aggregator agg;
  int net = 0;
  int local = 0;
  agg.AddComm(&net, {0x51, 1, 4, 2, "", true});    // Half of each task leaves the node.
  agg.AddComm(&local, {0x52, 0, 4, 2, "", true});  // Nothing reaches the NIC.
  const int64_t period = 50'000'000;
  uint64_t id = 1;
  auto send = [&](uint64_t task, uint64_t bytes) {
    Record op;
    op.kind = RecordKind::kProxyOpStart;
    op.id = id++;
    op.parent = task;
    op.comm = &net;
    op.peer = 2;
    agg.Consume(op);
    Record step;
    step.kind = RecordKind::kSendBytes;
    step.id = op.id;
    step.value = bytes;
    agg.Consume(step);
  };
  std::optional<hostd::RankProfile> p;
  for (int it = 0; it < 30 && !(p && !p->comms.empty() && !p->comms[0].peers.empty()); ++it) {
    const int64_t host = 1'000'000 + it * period;
    if (it == 4) agg.SamplingStarted(host);
    uint64_t straddling = 0;
    for (int b = 0; b < 3; ++b) {
      const int64_t g = 1'000'000'000'000 + it * period + 30'000'000 + b * 4'000'000;
      for (int* comm : {&net, &local}) {
        const uint64_t task = id++;
        agg.Consume(Task(task, comm, host + b * 4'000'000, 1'000'000));  // 6 MB estimated.
        agg.Consume(Kernel(RecordKind::kKernelStart, task, g));
        const bool sampled = it >= 4 && it <= 6;
        if (comm == &net && sampled && !(it == 6 && b == 2)) send(task, 3'000'000);
        if (comm == &net && it == 6 && b == 2) {
          straddling = task;  // Started in the window; its sends come after it closed.
          continue;
        }
        agg.Consume(Kernel(RecordKind::kKernelStop, task, g + 3'000'000));
      }
    }
    if (it == 6) {
      agg.SamplingEnded(host + period - 1);
      agg.Consume(Kernel(RecordKind::kKernelStop, straddling,
                         1'000'000'000'000 + it * period + 41'000'000));
    }
    if (auto fresh = agg.TakeProfile("j")) p = fresh;
  }
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->comms.size(), 2u);
  EXPECT_EQ(agg.sampled_windows(), 1u);
  for (const auto& c : p->comms) {
    if (c.hash == 0x51) {
      EXPECT_EQ(c.bytes, 9'000'000u);  // 3 tasks x 6 MB x exactly one half.
      ASSERT_EQ(c.peers.size(), 1u);
      EXPECT_EQ(c.peers[0].peer_rank, 2);
      EXPECT_EQ(c.peers[0].bytes, 9'000'000u);
    } else {
      EXPECT_EQ(c.bytes, 0u);  // Covered by the window, no sends: intra-node.
      EXPECT_TRUE(c.peers.empty());
    }
  }
}

// Feeds `iterations` periodic all-reduces of one task each on `comm` (GPU times from 10^12) and
// returns the last profile the Aggregator gave; `per_task` runs after each task's start.
template <typename F>
std::optional<hostd::RankProfile> Periodic(Aggregator& agg, const void* comm, uint64_t& id,
                                           int iterations, F per_task) {
  std::optional<hostd::RankProfile> p;
  for (int it = 0; it < iterations; ++it) {
    const int64_t g = 1'000'000'000'000 + it * 50'000'000;
    const uint64_t task = id++;
    agg.Consume(Task(task, comm, 10 + it * 1000, 1'000'000));
    per_task(task);
    agg.Consume(Kernel(RecordKind::kKernelStart, task, g));
    agg.Consume(Kernel(RecordKind::kKernelStop, task, g + 3'000'000));
    if (auto fresh = agg.TakeProfile("j")) p = fresh;
  }
  return p;
}

// NCCL's sizes are size_t: proxy byte counts near 2^64 saturate instead of wrapping, and the
// profile never claims more than the protocol's 2^50 bytes per iteration (the scaled estimate
// used to overflow the conversion from double).
TEST(AggregatorTest, HugeProxyBytesSaturateAtTheProtocolLimit) {
  Aggregator agg;
  int comm = 0;
  agg.AddComm(&comm, {0x61, 1, 4, 2, "", true});
  uint64_t id = 1;
  agg.SamplingStarted(0);
  uint64_t op_id = 1'000'000;
  auto p = Periodic(agg, &comm, id, 20, [&](uint64_t task) {
    Record op;
    op.kind = RecordKind::kProxyOpStart;
    op.id = ++op_id;
    op.parent = task;
    op.comm = &comm;
    op.peer = 2;
    agg.Consume(op);
    Record step;
    step.kind = RecordKind::kSendBytes;
    step.id = op.id;
    step.value = UINT64_MAX;
    agg.Consume(step);
    agg.Consume(step);
  });
  agg.SamplingEnded(1);
  if (auto fresh = agg.TakeProfile("j")) p = fresh;
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->comms.size(), 1u);
  constexpr uint64_t kLimit = uint64_t{1} << 50;
  EXPECT_EQ(p->comms[0].bytes, kLimit);
  ASSERT_EQ(p->comms[0].peers.size(), 1u);
  EXPECT_EQ(p->comms[0].peers[0].peer_rank, 2);
  EXPECT_EQ(p->comms[0].peers[0].bytes, kLimit);
}

// Peer ranks outside [0, nranks) name nobody: no split entry, and their proxy bytes are orphans.
TEST(AggregatorTest, PeersOutsideTheCommunicatorAreIgnored) {
  Aggregator agg;
  int comm = 0;
  agg.AddComm(&comm, {0x62, 0, 4, 2, "", true});
  uint64_t id = 1;
  auto p = Periodic(agg, &comm, id, 20, [&](uint64_t /*task*/) {
    for (int peer : {-7, 4, 1 << 30}) {
      Record send = Task(id++, &comm, 0, 1000, 1, "Send");
      send.is_p2p = 1;
      send.peer = peer;
      agg.Consume(send);
    }
  });
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->comms.size(), 1u);
  EXPECT_TRUE(p->comms[0].peers.empty());
  const uint64_t orphans = agg.orphan_records();
  Record op;
  op.kind = RecordKind::kProxyOpStart;
  op.id = 77;
  op.comm = &comm;
  op.peer = 4;
  agg.Consume(op);
  Record step;
  step.kind = RecordKind::kSendBytes;
  step.id = 77;
  step.value = 1000;
  agg.Consume(step);
  EXPECT_EQ(agg.orphan_records(), orphans + 1);
}

// A GPU timer beyond 2^61 ns (73 years of uptime) is not a globaltimer reading: ignored, so the
// GPU - host offset cannot overflow when it shifts another task.
TEST(AggregatorTest, GpuTimesBeyondTheClockAreIgnored) {
  AggregatorOptions o;
  o.task_timeout_ns = 1000;
  Aggregator agg(o);
  int comm = 0;
  agg.AddComm(&comm, {0x63, 0, 2, 1, "", true});
  agg.Consume(Task(1, &comm, 100, 10));
  agg.Consume(Kernel(RecordKind::kKernelStart, 1, UINT64_MAX));
  agg.Consume(Kernel(RecordKind::kKernelStop, 1, uint64_t{1} << 62));
  EXPECT_EQ(agg.orphan_records(), 2u);
  EXPECT_EQ(agg.collectives(), 0u);
  agg.Consume(Task(2, &comm, INT64_MAX / 2, 10));
  agg.Expire(INT64_MAX);
  EXPECT_EQ(agg.collectives(), 2u);
}

}  // namespace
}  // namespace crux::nccl_profiler
