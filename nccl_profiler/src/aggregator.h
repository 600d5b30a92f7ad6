// Aggregator: the plugin's in-process aggregation, run on its background thread. It turns the
// hot path's Records into one transfer per collective / p2p operation and feeds them to the
// client library's Profiler (client_lib/src/profiler.h), whose period detector finds the
// iteration period from the repeating collective sequence; the Profiler's peers are the
// process's communicators (grouped by commHash).
//
// Per task (a Coll or P2p event):
//   bytes    the rank's on-wire estimate for the function (NCCL-tests bus factors):
//            AllReduce 2(n-1)/n S; AllGather / ReduceScatter / AlltoAll (n-1) S (S = the
//            per-rank count); Broadcast / Reduce (n-1)/n S; Send S; Recv, n = 1: 0.
//            S = count x datatype size. Inside sampling windows NCCL also reports the proxy
//            steps' real bytes to each peer (ProxyStep transSize): per communicator the ratio
//            real / estimated over the sampled tasks scales the estimate (intra-node traffic,
//            which never reaches the NIC, drops out) and the split over peer ranks is
//            reported. P2p sends name their peer directly. A task is sampled when NCCL reported
//            a proxy op for it (its sends were seen), or when a window was open for its whole
//            life and none came (it sent nothing over the network); a task that straddles a
//            window's edge without proxy ops is left out, so the edges bias neither way.
//   interval the GPU time [first channel start, last channel stop] from the KernelCh events
//            (globaltimer ns). A task whose kernel events never all arrive is closed after
//            `task_timeout_ns` of host time with what it has; one with no GPU time at all is
//            placed at its host start time shifted by the communicator's GPU - host offset
//            (the smallest seen), so every transfer of a job is on the GPU timeline.
//
// Inputs are NCCL's and are not trusted: byte sums saturate (a communicator never reports more
// than the protocol's 2^50 bytes per iteration), peer ranks outside [0, nranks) name nobody (no
// split entry; their proxy steps are orphans), GPU times above 2^61 ns are orphans, and records
// naming an unknown communicator or task are orphans.
//
// A RankProfile is due when the Profiler reports (converged, then on a significant change), and
// again when a finished sampling window changes a communicator's bytes by more than
// `resend_change` or gives it a peer split for the first time.
//
// Thread-safety: none (owned by the plugin's background thread).
#ifndef CRUX_NCCL_PROFILER_SRC_AGGREGATOR_H_
#define CRUX_NCCL_PROFILER_SRC_AGGREGATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crux/hostd/host_protocol.h"
#include "profiler.h"  // client_lib/src.
#include "recorder.h"

namespace crux::nccl_profiler {

struct AggregatorOptions {
  client::ProfilerOptions profiler;
  int64_t task_timeout_ns = 2'000'000'000;
  size_t max_open_tasks = 1 << 16;  // Oldest closed first beyond this.
  size_t max_open_ops = 1 << 16;
  double resend_change = 0.2;
  uint32_t max_comms = 1024;  // Communicators tracked per process.
};

// Bytes of one element of NCCL's datatype name ("ncclFloat32" -> 4), 0 when unknown.
uint32_t DatatypeSize(std::string_view datatype);
// The rank's estimated on-wire bytes for a task (see the file comment).
uint64_t EstimatedWireBytes(std::string_view func, uint64_t count, uint32_t type_size, int nranks);

class Aggregator {
 public:
  explicit Aggregator(AggregatorOptions options = {});

  // A communicator (profiler init). `key` is the context pointer the plugin gave NCCL.
  void AddComm(const void* key, const hostd::CommInfo& info);
  // Finalized: kept (alive = false) so that its transfers still count.
  void RemoveComm(const void* key);

  void Consume(const Record& r);
  // Closes tasks started more than task_timeout_ns before `now_ns` (host steady clock).
  void Expire(int64_t now_ns);

  // Sampling windows in host time (the plugin turns NCCL's proxy events on in between).
  // Precondition: SamplingStarted's time is taken after the proxy events are on, and
  // SamplingEnded is called (with any time) before they go off.
  void SamplingStarted(int64_t now_ns);
  void SamplingEnded(int64_t now_ns);

  // The profile to send to crux-hostd, when one is due (see the file comment).
  std::optional<hostd::RankProfile> TakeProfile(const std::string& job_id);

  // The communicator with the most ranks (the first one of that size), for the job-id rule.
  std::optional<uint64_t> WorldCommHash() const;
  std::vector<hostd::CommInfo> comms() const;

  uint64_t records() const { return records_; }
  uint64_t collectives() const { return collectives_; }
  uint64_t sampled_windows() const { return windows_ended_; }
  uint64_t orphan_records() const { return orphans_; }

 private:
  struct Comm {
    hostd::CommInfo info;
    bool have_offset = false;
    int64_t gpu_minus_host = 0;
    // Estimated bytes of the sampled tasks (see the file comment), added when a task closes.
    uint64_t sampled_estimate = 0;
    uint64_t sampled_sent = 0;  // Proxy bytes sent (all windows).
    std::map<int, uint64_t> sent_to;
    std::map<int, uint64_t> p2p_to;  // Estimated p2p send bytes per peer.
  };
  struct Task {
    uint32_t comm = 0;
    uint64_t bytes = 0;
    int64_t host_ns = 0;
    int64_t gpu_start = 0;
    int64_t gpu_end = 0;
    uint32_t channels = 1;
    uint32_t stops = 0;
    bool proxy_seen = false;  // NCCL reported a proxy op (a network send) for it.
  };
  struct Op {
    uint32_t comm = 0;
    int peer = -1;
  };

  std::optional<uint32_t> CommIndex(const void* key) const;
  void StartTask(const Record& r);
  void Close(uint64_t id, Task& t);
  // Whether a sampling window is open now and has been since `host_ns`.
  bool SampledSince(int64_t host_ns) const;
  hostd::RankProfile Build(const std::string& job_id) const;
  bool MateriallyDifferent(const hostd::RankProfile& a, const hostd::RankProfile& b) const;

  AggregatorOptions options_;
  client::internal::Profiler profiler_;
  std::vector<Comm> comms_;  // Index = the Profiler's peer id.
  std::unordered_map<const void*, uint32_t> by_key_;
  std::unordered_map<uint64_t, Task> tasks_;
  std::deque<uint64_t> task_order_;  // Start order, for expiry (ids of closed tasks skipped).
  std::unordered_map<uint64_t, Op> ops_;
  std::deque<uint64_t> op_order_;
  std::optional<int64_t> window_open_since_;  // Host time; empty while no window is open.
  uint64_t windows_ended_ = 0;
  bool split_changed_ = false;

  std::optional<client::Profile> last_profile_;
  std::vector<client::PeerId> last_index_;
  std::optional<hostd::RankProfile> last_sent_;

  uint64_t records_ = 0;
  uint64_t collectives_ = 0;
  uint64_t orphans_ = 0;
};

}  // namespace crux::nccl_profiler

#endif  // CRUX_NCCL_PROFILER_SRC_AGGREGATOR_H_
