// Multi-phase training iterations; see traffic_model.h for the model and its sources.
#include "crux/core/model/traffic_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <utility>

namespace crux::core {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

bool FiniteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

// ---- Rank geometry ----

// Coordinates of every rank, and groups of ranks along one or more axes.
class Geometry {
 public:
  explicit Geometry(const ParallelLayout& l) : l_(l) {
    // Innermost first.
    dims_ = l.order == RankOrder::kTpCpDpPp
                ? std::array<ParallelAxis, 4>{ParallelAxis::kTp, ParallelAxis::kCp,
                                              ParallelAxis::kDp, ParallelAxis::kPp}
                : std::array<ParallelAxis, 4>{ParallelAxis::kTp, ParallelAxis::kCp,
                                              ParallelAxis::kPp, ParallelAxis::kDp};
    int stride = 1;
    for (ParallelAxis a : dims_) {
      stride_[Index(a)] = stride;
      stride *= Size(a);
    }
  }

  int Size(ParallelAxis a) const {
    switch (a) {
      case ParallelAxis::kTp:
        return l_.tp;
      case ParallelAxis::kCp:
        return l_.cp;
      case ParallelAxis::kDp:
        return l_.dp;
      case ParallelAxis::kPp:
        return l_.pp;
      case ParallelAxis::kEp:
        return l_.ep;
    }
    return 1;
  }
  int Coord(int rank, ParallelAxis a) const { return (rank / stride_[Index(a)]) % Size(a); }
  int host(int rank) const { return rank / l_.gpus_per_host; }
  int gpu(int rank) const { return rank % l_.gpus_per_host; }

  // Groups of ranks sharing `key(rank)` (an integer in [0, gpus)), members in rank order,
  // groups in order of their smallest rank.
  template <typename Key>
  std::vector<std::vector<int>> GroupBy(Key key) const {
    const int n = l_.gpus();
    std::vector<int> slot(static_cast<size_t>(n), -1);
    std::vector<std::vector<int>> out;
    for (int r = 0; r < n; ++r) {
      int& s = slot[static_cast<size_t>(key(r))];
      if (s < 0) {
        s = static_cast<int>(out.size());
        out.emplace_back();
      }
      out[static_cast<size_t>(s)].push_back(r);
    }
    return out;
  }

  // Groups whose members differ only in the given axes.
  std::vector<std::vector<int>> Along(std::vector<ParallelAxis> varying) const {
    return GroupBy([&](int r) {
      int k = 0;
      for (ParallelAxis a : dims_) {
        if (std::find(varying.begin(), varying.end(), a) == varying.end()) {
          k = k * Size(a) + Coord(r, a);
        }
      }
      return k;
    });
  }

 private:
  static int Index(ParallelAxis a) {
    switch (a) {
      case ParallelAxis::kTp:
        return 0;
      case ParallelAxis::kCp:
        return 1;
      case ParallelAxis::kDp:
        return 2;
      case ParallelAxis::kPp:
        return 3;
      case ParallelAxis::kEp:
        return 2;  // EP lives on the DP axis.
    }
    return 0;
  }

  ParallelLayout l_;
  std::array<ParallelAxis, 4> dims_{};
  std::array<int, 4> stride_{};
};

// A group's hosts (in rank order) and the local GPUs of its members on each.
struct GroupHosts {
  std::vector<int> hosts;
  std::vector<std::vector<int>> local;  // Per host, ascending.
};

GroupHosts HostsOf(const Geometry& g, const std::vector<int>& members) {
  GroupHosts out;
  for (int r : members) {
    const int h = g.host(r);
    if (out.hosts.empty() || out.hosts.back() != h) {
      auto it = std::find(out.hosts.begin(), out.hosts.end(), h);
      if (it == out.hosts.end()) {
        out.hosts.push_back(h);
        out.local.emplace_back();
        it = out.hosts.end() - 1;
      }
      out.local[static_cast<size_t>(it - out.hosts.begin())].push_back(g.gpu(r));
    } else {
      out.local.back().push_back(g.gpu(r));
    }
  }
  for (auto& l : out.local) std::sort(l.begin(), l.end());
  return out;
}

// Flows of one hierarchical ring collective over `members` with buffer `elements`.
void AddRingFlows(const Geometry& g, const std::vector<int>& members, Collective c, double elements,
                  WireDtype dtype, std::vector<RailFlow>& out) {
  const GroupHosts gh = HostsOf(g, members);
  const int h = static_cast<int>(gh.hosts.size());
  if (h < 2) return;
  size_t k = gh.local[0].size();
  for (const auto& l : gh.local) k = std::min(k, l.size());
  const Bytes per_ring = RingHostBytes(c, elements, h, dtype) * (1.0 / static_cast<double>(k));
  if (per_ring.count() <= 0) return;
  for (int i = 0; i < h; ++i) {
    const int next = (i + 1) % h;
    for (size_t j = 0; j < k; ++j) {
      out.push_back(RailFlow{gh.hosts[static_cast<size_t>(i)], gh.local[static_cast<size_t>(i)][j],
                             gh.hosts[static_cast<size_t>(next)],
                             gh.local[static_cast<size_t>(next)][j], per_ring});
    }
  }
}

// Flows of one all-to-all over `members`: every member sends `copies` copies of `elements`
// elements, spread uniformly over the members; the remote ones go rail-aligned (PXN).
void AddAllToAllFlows(const Geometry& g, const std::vector<int>& members, double per_member_bytes,
                      std::vector<RailFlow>& out) {
  const GroupHosts gh = HostsOf(g, members);
  const size_t h = gh.hosts.size();
  if (h < 2) return;
  const double n = static_cast<double>(members.size());
  for (int r : members) {
    const int src = g.host(r);
    for (size_t d = 0; d < h; ++d) {
      if (gh.hosts[d] == src) continue;
      const Bytes b =
          Bytes::FromDouble(per_member_bytes * static_cast<double>(gh.local[d].size()) / n);
      if (b.count() <= 0) continue;
      out.push_back(RailFlow{src, g.gpu(r), gh.hosts[d], g.gpu(r), b});
    }
  }
}

// Segment indices of the iteration (file comment of the header): fwd1..fwdK, bubble,
// bwdK..bwd1.
struct Segments {
  int k = 1;
  int fwd(int i) const { return i - 1; }  // i in 1..k
  int bubble() const { return k; }
  int bwd(int i) const { return 2 * k - i + 1; }  // i in 1..k; bwd(k) right after the bubble
  int count() const { return 2 * k + 1; }
};

std::string Indexed(const std::string& base, int i) { return base + std::to_string(i); }

}  // namespace

// ---- Vocabulary ----

int BytesPerElement(WireDtype d) {
  switch (d) {
    case WireDtype::kFp8:
      return 1;
    case WireDtype::kBf16:
    case WireDtype::kFp16:
      return 2;
    case WireDtype::kFp32:
      return 4;
  }
  return 2;
}

std::string_view WireDtypeName(WireDtype d) {
  switch (d) {
    case WireDtype::kFp8:
      return "fp8";
    case WireDtype::kBf16:
      return "bf16";
    case WireDtype::kFp16:
      return "fp16";
    case WireDtype::kFp32:
      return "fp32";
  }
  return "bf16";
}

Result<WireDtype> ParseWireDtype(std::string_view name) {
  for (WireDtype d : {WireDtype::kFp8, WireDtype::kBf16, WireDtype::kFp16, WireDtype::kFp32}) {
    if (WireDtypeName(d) == name) return d;
  }
  return InvalidArgumentError("unknown wire dtype '" + std::string(name) +
                              "' (expected fp8, bf16, fp16 or fp32)");
}

std::string_view ParallelAxisName(ParallelAxis a) {
  switch (a) {
    case ParallelAxis::kTp:
      return "tp";
    case ParallelAxis::kCp:
      return "cp";
    case ParallelAxis::kEp:
      return "ep";
    case ParallelAxis::kDp:
      return "dp";
    case ParallelAxis::kPp:
      return "pp";
  }
  return "dp";
}

std::string_view CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "all_reduce";
}

std::string_view DpShardingName(DpSharding s) {
  switch (s) {
    case DpSharding::kNone:
      return "none";
    case DpSharding::kZero1:
      return "zero1";
    case DpSharding::kZero3:
      return "zero3";
  }
  return "none";
}

Result<DpSharding> ParseDpSharding(std::string_view name) {
  for (DpSharding s : {DpSharding::kNone, DpSharding::kZero1, DpSharding::kZero3}) {
    if (DpShardingName(s) == name) return s;
  }
  return InvalidArgumentError("unknown DP sharding '" + std::string(name) +
                              "' (expected none, zero1 or zero3)");
}

// ---- Byte maths ----

Bytes RingHostBytes(Collective c, double buffer_elements, int hosts, WireDtype dtype) {
  if (hosts < 2 || !(buffer_elements > 0)) return Bytes();
  const double factor = c == Collective::kAllReduce ? 2.0 : 1.0;
  const double h = static_cast<double>(hosts);
  return Bytes::FromDouble(factor * (h - 1) / h * buffer_elements * BytesPerElement(dtype));
}

double RemoteShare(int members, int local) {
  if (members < 1) return 0;
  return static_cast<double>(std::max(0, members - local)) / static_cast<double>(members);
}

// ---- Recipe ----

Status ValidateRecipe(const TrainingRecipe& r) {
  const ParallelLayout& l = r.layout;
  for (auto [name, v] : {std::pair<const char*, int>{"tp", l.tp},
                         {"cp", l.cp},
                         {"pp", l.pp},
                         {"dp", l.dp},
                         {"ep", l.ep},
                         {"vp", l.vp},
                         {"gpus_per_host", l.gpus_per_host}}) {
    if (v < 1 || v > (1 << 20)) {
      return InvalidArgumentError(std::string("layout.") + name + ": must be in [1, 2^20] (got " +
                                  std::to_string(v) + ")");
    }
  }
  if (static_cast<int64_t>(l.tp) * l.cp * l.pp * l.dp > kMaxIterationGpus) {
    return InvalidArgumentError("layout: tp x cp x pp x dp must be at most " +
                                std::to_string(kMaxIterationGpus) + " GPUs");
  }
  if (l.pp > kMaxPipelineStages) {
    return InvalidArgumentError("layout.pp: must be at most " + std::to_string(kMaxPipelineStages) +
                                " (got " + std::to_string(l.pp) + ")");
  }
  if (l.dp % l.ep != 0) {
    return InvalidArgumentError("layout.ep: must divide dp (got " + std::to_string(l.ep) + ", dp " +
                                std::to_string(l.dp) + ")");
  }
  if (l.gpus() > l.gpus_per_host && l.gpus() % l.gpus_per_host != 0) {
    return InvalidArgumentError("layout: a job larger than one host must fill whole hosts (" +
                                std::to_string(l.gpus()) + " GPUs, " +
                                std::to_string(l.gpus_per_host) + " per host)");
  }
  if (r.micro_batches < 1) {
    return InvalidArgumentError("micro_batches: must be >= 1 (got " +
                                std::to_string(r.micro_batches) + ")");
  }
  if (r.dp_buckets < 1 || r.dp_buckets > 64) {
    return InvalidArgumentError("dp_buckets: must be in [1, 64] (got " +
                                std::to_string(r.dp_buckets) + ")");
  }
  if (r.compute < Duration::Zero()) return InvalidArgumentError("compute: must be >= 0");
  if (!(r.forward_share > 0 && r.forward_share < 1)) {
    return InvalidArgumentError("forward_share: must be in (0, 1) (got " + Num(r.forward_share) +
                                ")");
  }
  if (!FiniteNonNegative(r.work_per_gpu.value())) {
    return InvalidArgumentError("work_per_gpu: must be finite and >= 0");
  }
  for (auto [name, v] :
       {std::pair<const char*, double>{"dense_params_per_rank", r.dense_params_per_rank},
        {"expert_params_per_rank", r.expert_params_per_rank},
        {"pp_elements_per_transfer", r.pp_elements_per_transfer},
        {"ep_tokens_per_microbatch", r.ep_tokens_per_microbatch},
        {"ep_fanout", r.ep_fanout},
        {"ep_hidden", r.ep_hidden},
        {"cp_buffer_elements", r.cp_buffer_elements},
        {"tp_elements_per_layer", r.tp_elements_per_layer}}) {
    if (!FiniteNonNegative(v) || v > 1e15) {
      return InvalidArgumentError(std::string(name) + ": must be in [0, 1e15] (got " + Num(v) +
                                  ")");
    }
  }
  for (auto [name, v] : {std::pair<const char*, double>{"layers_per_rank", r.layers_per_rank},
                         {"moe_layers_per_rank", r.moe_layers_per_rank}}) {
    if (!FiniteNonNegative(v) || v > 1e5) {
      return InvalidArgumentError(std::string(name) + ": must be in [0, 1e5] (got " + Num(v) + ")");
    }
  }
  // Bounds on the model's size (transfers per op, flows per op), so that no input can make
  // BuildIteration or TimeIteration run for minutes or exhaust memory.
  const double m = r.micro_batches;
  for (auto [name, v] : {std::pair<const char*, double>{"micro_batches x vp", m * l.vp},
                         {"layers_per_rank x micro_batches", r.layers_per_rank * m},
                         {"moe_layers_per_rank x micro_batches", r.moe_layers_per_rank * m}}) {
    if (v > kMaxOpInstances) {
      return InvalidArgumentError(std::string(name) + ": must be at most " +
                                  std::to_string(kMaxOpInstances) + " (got " + Num(v) + ")");
    }
  }
  if (static_cast<int64_t>(r.dp_buckets) * l.gpus() > kMaxIterationGpus * 16) {
    return InvalidArgumentError(
        "dp_buckets: dp_buckets x GPUs must be at most " + std::to_string(kMaxIterationGpus * 16) +
        " (got " + std::to_string(r.dp_buckets) + " x " + std::to_string(l.gpus()) + ")");
  }
  if (r.expert_params_per_rank > 0 && l.ep < 1) {
    return InvalidArgumentError("expert_params_per_rank: needs ep >= 1");
  }
  return Status::Ok();
}

// ---- BuildIteration ----

namespace {

// The compute segments of stage 0 (file comment of the header): fwd1..fwdK, the bubble,
// bwdK..bwd1.
std::vector<ComputeSegment> BuildSegments(const TrainingRecipe& r) {
  const ParallelLayout& l = r.layout;
  const int k = r.dp_buckets;
  const double m = r.micro_batches;
  const double v = l.vp;
  const double c = r.compute.ToSeconds();
  const double bubble = l.pp > 1 ? c * (l.pp - 1) / (v * m) : 0.0;
  std::vector<ComputeSegment> segments;
  for (int i = 1; i <= k; ++i) {
    segments.push_back({Indexed("fwd", i), Duration::Seconds(c * r.forward_share / k), true});
  }
  segments.push_back({"bubble", Duration::Seconds(bubble), false});
  for (int i = k; i >= 1; --i) {
    segments.push_back({Indexed("bwd", i), Duration::Seconds(c * (1 - r.forward_share) / k), true});
  }
  return segments;
}

// Collects the communication ops of one iteration, one parallelism at a time. The order of the
// calls is part of the model: an op names the op it is chained after by index, and the timing
// breaks ties between ops by index.
class OpBuilder {
 public:
  // REQUIRES: ValidateRecipe(r) is OK. `r` outlives the builder.
  explicit OpBuilder(const TrainingRecipe& r)
      : r_(r),
        l_(r.layout),
        g_(r.layout),
        seg_{r.dp_buckets},
        k_(r.dp_buckets),
        m_(r.micro_batches),
        v_(r.layout.vp),
        end_(seg_.count()) {}

  // Per DP bucket, the gradient all-reduce (no sharding) or reduce-scatter and the parameter
  // all-gathers (ZeRO): dense parameters over (cp, dp), experts over the expert-DP group.
  void AddDataParallel();
  // Per direction, the fill or drain chain of one transfer per stage boundary, then the
  // steady-state transfers (and, interleaved, the last-to-first ones) paced with the compute.
  void AddPipeline();
  // The four all-to-alls of every MoE layer and micro-batch, paced with the compute.
  void AddExpertParallel();
  // The context-parallel all-gather and reduce-scatter, and the tensor-parallel all-reduces
  // when a TP group spans hosts: exposed blocks before fwd[1] and bwd[K].
  void AddContextAndTensor();

  // The ops added so far, in the order they were added.
  std::vector<CommOp> Take() && { return std::move(ops_); }

 private:
  // Keeps `op` unless it has no inter-host flows (the model leaves those out). Returns its index
  // in the ops, or -1 when it was left out.
  int Add(CommOp op) {
    if (op.flows.empty()) return -1;
    ops_.push_back(std::move(op));
    return static_cast<int>(ops_.size()) - 1;
  }

  // An op with no flows yet; instances below 1 count as 1.
  static CommOp Op(std::string name, ParallelAxis axis, Collective coll, WireDtype dtype,
                   int instances, Pacing pacing, int issue_after, int needed_before) {
    CommOp o;
    o.name = std::move(name);
    o.axis = axis;
    o.collective = coll;
    o.dtype = dtype;
    o.instances = std::max(1, instances);
    o.pacing = pacing;
    o.issue_after = issue_after;
    o.needed_before = needed_before;
    return o;
  }

  const TrainingRecipe& r_;
  const ParallelLayout& l_;
  const Geometry g_;
  const Segments seg_;
  // K, m and v of the header's formulas; m and v as doubles, as the byte maths uses them.
  const int k_;
  const double m_;
  const double v_;
  const int end_;  // needed_before of an op that the iteration's end waits for.
  std::vector<CommOp> ops_;
};

void OpBuilder::AddDataParallel() {
  struct DpBuffer {
    const char* tag;
    double elements;
    std::vector<std::vector<int>> groups;
  };
  std::vector<DpBuffer> buffers;
  if (r_.dense_params_per_rank > 0) {
    buffers.push_back(
        {"dp", r_.dense_params_per_rank, g_.Along({ParallelAxis::kCp, ParallelAxis::kDp})});
  }
  if (r_.expert_params_per_rank > 0) {
    // Same tp, cp, pp and expert shard (dp mod ep).
    buffers.push_back(
        {"edp", r_.expert_params_per_rank, g_.GroupBy([&](int rank) {
           return ((g_.Coord(rank, ParallelAxis::kTp) * l_.cp + g_.Coord(rank, ParallelAxis::kCp)) *
                       l_.pp +
                   g_.Coord(rank, ParallelAxis::kPp)) *
                      l_.ep +
                  g_.Coord(rank, ParallelAxis::kDp) % l_.ep;
         })});
  }
  for (const DpBuffer& buf : buffers) {
    const double per_bucket = buf.elements / k_;
    auto flows = [&](Collective coll, WireDtype dtype) {
      std::vector<RailFlow> f;
      for (const auto& group : buf.groups) AddRingFlows(g_, group, coll, per_bucket, dtype, f);
      return f;
    };
    const std::string t = buf.tag;
    if (r_.sharding == DpSharding::kNone) {
      const std::vector<RailFlow> f = flows(Collective::kAllReduce, r_.grad_dtype);
      for (int i = 1; i <= k_; ++i) {
        CommOp o = Op(t + ".ar.bucket" + std::to_string(i), ParallelAxis::kDp,
                      Collective::kAllReduce, r_.grad_dtype, 1, Pacing::kBurst, seg_.bwd(i), end_);
        o.flows = f;
        Add(std::move(o));
      }
      continue;
    }
    const std::vector<RailFlow> rs = flows(Collective::kReduceScatter, r_.grad_dtype);
    const std::vector<RailFlow> ag = flows(Collective::kAllGather, r_.param_dtype);
    for (int i = 1; i <= k_; ++i) {
      CommOp o = Op(t + ".ag.bucket" + std::to_string(i), ParallelAxis::kDp, Collective::kAllGather,
                    r_.param_dtype, 1, Pacing::kBurst, -1, seg_.fwd(i));
      o.flows = ag;
      Add(std::move(o));
    }
    if (r_.sharding == DpSharding::kZero3) {
      for (int i = k_; i >= 1; --i) {
        CommOp o =
            Op(t + ".ag_bwd.bucket" + std::to_string(i), ParallelAxis::kDp, Collective::kAllGather,
               r_.param_dtype, 1, Pacing::kBurst, seg_.fwd(k_), seg_.bwd(i));
        o.flows = ag;
        Add(std::move(o));
      }
    }
    for (int i = k_; i >= 1; --i) {
      CommOp o =
          Op(t + ".rs.bucket" + std::to_string(i), ParallelAxis::kDp, Collective::kReduceScatter,
             r_.grad_dtype, 1, Pacing::kBurst, seg_.bwd(i), end_);
      o.flows = rs;
      Add(std::move(o));
    }
  }
}

void OpBuilder::AddPipeline() {
  if (l_.pp <= 1 || !(r_.pp_elements_per_transfer > 0)) return;
  const Bytes per_gpu =
      Bytes::FromDouble(r_.pp_elements_per_transfer / l_.tp * BytesPerElement(r_.pp_dtype));
  const auto pipes = g_.Along({ParallelAxis::kPp});
  // Flows of boundary s -> s + 1 (forward) or s + 1 -> s (backward) of every pipeline.
  auto boundary = [&](int s, bool forward) {
    std::vector<RailFlow> f;
    for (const auto& pipe : pipes) {
      const int a = pipe[static_cast<size_t>(s)];
      const int b = pipe[static_cast<size_t>((s + 1) % l_.pp)];
      const int src = forward ? a : b;
      const int dst = forward ? b : a;
      if (g_.host(src) == g_.host(dst) || per_gpu.count() <= 0) continue;
      f.push_back(RailFlow{g_.host(src), g_.gpu(src), g_.host(dst), g_.gpu(dst), per_gpu});
    }
    return f;
  };
  const int per_boundary = static_cast<int>(m_ * v_);
  for (bool forward : {true, false}) {
    const char* dir = forward ? "fwd" : "bwd";
    // Fill (forward, before the bubble) or drain (backward, after it): a chain of single
    // transfers, hop after hop, on stage 0's critical path.
    int prev = -1;
    for (int hop = 0; hop < l_.pp - 1; ++hop) {
      const int s = forward ? hop : l_.pp - 2 - hop;
      CommOp o = Op(std::string("pp.") + (forward ? "fill" : "drain") + std::to_string(hop + 1),
                    ParallelAxis::kPp, Collective::kSendRecv, r_.pp_dtype, 1, Pacing::kBurst,
                    forward ? seg_.fwd(k_) : seg_.bubble(), forward ? seg_.bubble() : seg_.bwd(k_));
      o.after_op = prev;
      o.flows = boundary(s, forward);
      const int added = Add(std::move(o));
      if (added >= 0) prev = added;
    }
    // Steady state: the other m v - 1 transfers per boundary, paced with the compute.
    std::vector<RailFlow> steady;
    for (int s = 0; s + 1 < l_.pp; ++s) {
      const std::vector<RailFlow> f = boundary(s, forward);
      steady.insert(steady.end(), f.begin(), f.end());
    }
    if (per_boundary > 1) {
      CommOp o = Op(std::string("pp.") + dir, ParallelAxis::kPp, Collective::kSendRecv, r_.pp_dtype,
                    per_boundary - 1, Pacing::kPaced, forward ? -1 : seg_.bubble(),
                    forward ? seg_.bubble() : end_);
      o.flows = std::move(steady);
      Add(std::move(o));
    }
    if (l_.vp > 1) {  // Interleaved: the last stage feeds the first, m (v - 1) times.
      CommOp o = Op(std::string("pp.") + dir + ".wrap", ParallelAxis::kPp, Collective::kSendRecv,
                    r_.pp_dtype, static_cast<int>(m_ * (v_ - 1)), Pacing::kPaced,
                    forward ? -1 : seg_.bubble(), forward ? seg_.bubble() : end_);
      o.flows = boundary(l_.pp - 1, forward);
      Add(std::move(o));
    }
  }
}

void OpBuilder::AddExpertParallel() {
  if (!(r_.moe_layers_per_rank > 0 && r_.ep_tokens_per_microbatch > 0 && r_.ep_fanout > 0 &&
        r_.ep_hidden > 0 && l_.ep > 1)) {
    return;
  }
  // Same tp, cp, pp and block of ep consecutive DP ranks.
  const auto ep_groups = g_.GroupBy([&](int rank) {
    return ((g_.Coord(rank, ParallelAxis::kTp) * l_.cp + g_.Coord(rank, ParallelAxis::kCp)) *
                l_.pp +
            g_.Coord(rank, ParallelAxis::kPp)) *
               (l_.dp / l_.ep) +
           g_.Coord(rank, ParallelAxis::kDp) / l_.ep;
  });
  const double copies = r_.ep_tokens_per_microbatch * r_.ep_fanout * r_.ep_hidden;
  const int instances = static_cast<int>(std::llround(r_.moe_layers_per_rank * m_));
  struct A2a {
    const char* name;
    WireDtype dtype;
    bool forward;
  };
  for (const A2a& a : {A2a{"ep.dispatch.fwd", r_.ep_dispatch_dtype, true},
                       A2a{"ep.combine.fwd", r_.ep_combine_dtype, true},
                       A2a{"ep.combine.bwd", r_.ep_backward_dtype, false},
                       A2a{"ep.dispatch.bwd", r_.ep_backward_dtype, false}}) {
    CommOp o = Op(a.name, ParallelAxis::kEp, Collective::kAllToAll, a.dtype, instances,
                  Pacing::kPaced, a.forward ? -1 : seg_.bubble(), a.forward ? seg_.bubble() : end_);
    for (const auto& group : ep_groups) {
      AddAllToAllFlows(g_, group, copies * BytesPerElement(a.dtype), o.flows);
    }
    Add(std::move(o));
  }
}

void OpBuilder::AddContextAndTensor() {
  const int layer_instances = static_cast<int>(std::llround(r_.layers_per_rank * m_));
  if (l_.cp > 1 && r_.cp_buffer_elements > 0 && layer_instances > 0) {
    const auto groups = g_.Along({ParallelAxis::kCp});
    for (bool forward : {true, false}) {
      const Collective coll = forward ? Collective::kAllGather : Collective::kReduceScatter;
      CommOp o = Op(forward ? "cp.ag.fwd" : "cp.rs.bwd", ParallelAxis::kCp, coll, r_.cp_dtype,
                    layer_instances, Pacing::kBurst, forward ? -1 : seg_.bubble(),
                    forward ? seg_.fwd(1) : seg_.bwd(k_));
      for (const auto& group : groups) {
        AddRingFlows(g_, group, coll, r_.cp_buffer_elements, r_.cp_dtype, o.flows);
      }
      Add(std::move(o));
    }
  }
  if (l_.tp > l_.gpus_per_host && r_.tp_elements_per_layer > 0 && layer_instances > 0) {
    const auto groups = g_.Along({ParallelAxis::kTp});
    for (bool forward : {true, false}) {
      CommOp o = Op(forward ? "tp.ar.fwd" : "tp.ar.bwd", ParallelAxis::kTp, Collective::kAllReduce,
                    r_.tp_dtype, 2 * layer_instances, Pacing::kBurst, forward ? -1 : seg_.bubble(),
                    forward ? seg_.fwd(1) : seg_.bwd(k_));
      for (const auto& group : groups) {
        AddRingFlows(g_, group, Collective::kAllReduce, r_.tp_elements_per_layer, r_.tp_dtype,
                     o.flows);
      }
      Add(std::move(o));
    }
  }
}

}  // namespace

Result<IterationModel> BuildIteration(const TrainingRecipe& r) {
  CRUX_RETURN_IF_ERROR(ValidateRecipe(r));
  IterationModel out;
  out.layout = r.layout;
  out.work = Flops::Of(r.work_per_gpu.value() * r.layout.gpus());
  out.segments = BuildSegments(r);
  OpBuilder ops(r);
  ops.AddDataParallel();
  ops.AddPipeline();
  ops.AddExpertParallel();
  ops.AddContextAndTensor();
  out.ops = std::move(ops).Take();
  return out;
}

// ---- Placement ----

size_t GpuNicIndex(uint32_t gpu, uint32_t gpus, size_t nics) {
  return static_cast<size_t>(uint64_t{gpu} * nics / gpus);
}

}  // namespace crux::core
