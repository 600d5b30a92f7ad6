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

Result<IterationModel> BuildIteration(const TrainingRecipe& r) {
  CRUX_RETURN_IF_ERROR(ValidateRecipe(r));
  const ParallelLayout& l = r.layout;
  const Geometry g(l);
  const Segments seg{r.dp_buckets};
  const int k = r.dp_buckets;
  const double m = r.micro_batches;
  const double v = l.vp;

  IterationModel out;
  out.layout = l;
  out.work = Flops::Of(r.work_per_gpu.value() * l.gpus());

  // Segments.
  const double c = r.compute.ToSeconds();
  const double bubble = l.pp > 1 ? c * (l.pp - 1) / (v * m) : 0.0;
  for (int i = 1; i <= k; ++i) {
    out.segments.push_back({Indexed("fwd", i), Duration::Seconds(c * r.forward_share / k), true});
  }
  out.segments.push_back({"bubble", Duration::Seconds(bubble), false});
  for (int i = k; i >= 1; --i) {
    out.segments.push_back(
        {Indexed("bwd", i), Duration::Seconds(c * (1 - r.forward_share) / k), true});
  }

  auto add = [&](CommOp op) {
    if (op.flows.empty()) return -1;
    out.ops.push_back(std::move(op));
    return static_cast<int>(out.ops.size()) - 1;
  };
  auto op = [](std::string name, ParallelAxis axis, Collective coll, WireDtype dtype, int instances,
               Pacing pacing, int issue_after, int needed_before) {
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
  };
  const int end = seg.count();

  // ---- Data parallel: dense over (cp, dp), experts over the expert-DP group. ----
  struct DpBuffer {
    const char* tag;
    double elements;
    std::vector<std::vector<int>> groups;
  };
  std::vector<DpBuffer> buffers;
  if (r.dense_params_per_rank > 0) {
    buffers.push_back(
        {"dp", r.dense_params_per_rank, g.Along({ParallelAxis::kCp, ParallelAxis::kDp})});
  }
  if (r.expert_params_per_rank > 0) {
    // Same tp, cp, pp and expert shard (dp mod ep).
    buffers.push_back(
        {"edp", r.expert_params_per_rank, g.GroupBy([&](int rank) {
           return ((g.Coord(rank, ParallelAxis::kTp) * l.cp + g.Coord(rank, ParallelAxis::kCp)) *
                       l.pp +
                   g.Coord(rank, ParallelAxis::kPp)) *
                      l.ep +
                  g.Coord(rank, ParallelAxis::kDp) % l.ep;
         })});
  }
  for (const DpBuffer& buf : buffers) {
    const double per_bucket = buf.elements / k;
    auto flows = [&](Collective coll, WireDtype dtype) {
      std::vector<RailFlow> f;
      for (const auto& group : buf.groups) AddRingFlows(g, group, coll, per_bucket, dtype, f);
      return f;
    };
    const std::string t = buf.tag;
    if (r.sharding == DpSharding::kNone) {
      const std::vector<RailFlow> f = flows(Collective::kAllReduce, r.grad_dtype);
      for (int i = 1; i <= k; ++i) {
        CommOp o = op(t + ".ar.bucket" + std::to_string(i), ParallelAxis::kDp,
                      Collective::kAllReduce, r.grad_dtype, 1, Pacing::kBurst, seg.bwd(i), end);
        o.flows = f;
        add(std::move(o));
      }
      continue;
    }
    const std::vector<RailFlow> rs = flows(Collective::kReduceScatter, r.grad_dtype);
    const std::vector<RailFlow> ag = flows(Collective::kAllGather, r.param_dtype);
    for (int i = 1; i <= k; ++i) {
      CommOp o = op(t + ".ag.bucket" + std::to_string(i), ParallelAxis::kDp, Collective::kAllGather,
                    r.param_dtype, 1, Pacing::kBurst, -1, seg.fwd(i));
      o.flows = ag;
      add(std::move(o));
    }
    if (r.sharding == DpSharding::kZero3) {
      for (int i = k; i >= 1; --i) {
        CommOp o =
            op(t + ".ag_bwd.bucket" + std::to_string(i), ParallelAxis::kDp, Collective::kAllGather,
               r.param_dtype, 1, Pacing::kBurst, seg.fwd(k), seg.bwd(i));
        o.flows = ag;
        add(std::move(o));
      }
    }
    for (int i = k; i >= 1; --i) {
      CommOp o = op(t + ".rs.bucket" + std::to_string(i), ParallelAxis::kDp,
                    Collective::kReduceScatter, r.grad_dtype, 1, Pacing::kBurst, seg.bwd(i), end);
      o.flows = rs;
      add(std::move(o));
    }
  }

  // ---- Pipeline: one transfer per boundary in the fill and the drain, the rest paced. ----
  if (l.pp > 1 && r.pp_elements_per_transfer > 0) {
    const Bytes per_gpu =
        Bytes::FromDouble(r.pp_elements_per_transfer / l.tp * BytesPerElement(r.pp_dtype));
    const auto pipes = g.Along({ParallelAxis::kPp});
    // Flows of boundary s -> s + 1 (forward) or s + 1 -> s (backward) of every pipeline.
    auto boundary = [&](int s, bool forward) {
      std::vector<RailFlow> f;
      for (const auto& pipe : pipes) {
        const int a = pipe[static_cast<size_t>(s)];
        const int b = pipe[static_cast<size_t>((s + 1) % l.pp)];
        const int src = forward ? a : b;
        const int dst = forward ? b : a;
        if (g.host(src) == g.host(dst) || per_gpu.count() <= 0) continue;
        f.push_back(RailFlow{g.host(src), g.gpu(src), g.host(dst), g.gpu(dst), per_gpu});
      }
      return f;
    };
    const int per_boundary = static_cast<int>(m * v);
    for (bool forward : {true, false}) {
      const char* dir = forward ? "fwd" : "bwd";
      // Fill (forward, before the bubble) or drain (backward, after it): a chain of single
      // transfers, hop after hop, on stage 0's critical path.
      int prev = -1;
      for (int hop = 0; hop < l.pp - 1; ++hop) {
        const int s = forward ? hop : l.pp - 2 - hop;
        CommOp o = op(std::string("pp.") + (forward ? "fill" : "drain") + std::to_string(hop + 1),
                      ParallelAxis::kPp, Collective::kSendRecv, r.pp_dtype, 1, Pacing::kBurst,
                      forward ? seg.fwd(k) : seg.bubble(), forward ? seg.bubble() : seg.bwd(k));
        o.after_op = prev;
        o.flows = boundary(s, forward);
        const int added = add(std::move(o));
        if (added >= 0) prev = added;
      }
      // Steady state: the other m v - 1 transfers per boundary, paced with the compute.
      std::vector<RailFlow> steady;
      for (int s = 0; s + 1 < l.pp; ++s) {
        const std::vector<RailFlow> f = boundary(s, forward);
        steady.insert(steady.end(), f.begin(), f.end());
      }
      if (per_boundary > 1) {
        CommOp o = op(std::string("pp.") + dir, ParallelAxis::kPp, Collective::kSendRecv,
                      r.pp_dtype, per_boundary - 1, Pacing::kPaced, forward ? -1 : seg.bubble(),
                      forward ? seg.bubble() : end);
        o.flows = std::move(steady);
        add(std::move(o));
      }
      if (l.vp > 1) {  // Interleaved: the last stage feeds the first, m (v - 1) times.
        CommOp o = op(std::string("pp.") + dir + ".wrap", ParallelAxis::kPp, Collective::kSendRecv,
                      r.pp_dtype, static_cast<int>(m * (v - 1)), Pacing::kPaced,
                      forward ? -1 : seg.bubble(), forward ? seg.bubble() : end);
        o.flows = boundary(l.pp - 1, forward);
        add(std::move(o));
      }
    }
  }

  // ---- Expert parallel all-to-alls, paced with the compute. ----
  if (r.moe_layers_per_rank > 0 && r.ep_tokens_per_microbatch > 0 && r.ep_fanout > 0 &&
      r.ep_hidden > 0 && l.ep > 1) {
    // Same tp, cp, pp and block of ep consecutive DP ranks.
    const auto ep_groups = g.GroupBy([&](int rank) {
      return ((g.Coord(rank, ParallelAxis::kTp) * l.cp + g.Coord(rank, ParallelAxis::kCp)) * l.pp +
              g.Coord(rank, ParallelAxis::kPp)) *
                 (l.dp / l.ep) +
             g.Coord(rank, ParallelAxis::kDp) / l.ep;
    });
    const double copies = r.ep_tokens_per_microbatch * r.ep_fanout * r.ep_hidden;
    const int instances = static_cast<int>(std::llround(r.moe_layers_per_rank * m));
    struct A2a {
      const char* name;
      WireDtype dtype;
      bool forward;
    };
    for (const A2a& a : {A2a{"ep.dispatch.fwd", r.ep_dispatch_dtype, true},
                         A2a{"ep.combine.fwd", r.ep_combine_dtype, true},
                         A2a{"ep.combine.bwd", r.ep_backward_dtype, false},
                         A2a{"ep.dispatch.bwd", r.ep_backward_dtype, false}}) {
      CommOp o = op(a.name, ParallelAxis::kEp, Collective::kAllToAll, a.dtype, instances,
                    Pacing::kPaced, a.forward ? -1 : seg.bubble(), a.forward ? seg.bubble() : end);
      for (const auto& group : ep_groups) {
        AddAllToAllFlows(g, group, copies * BytesPerElement(a.dtype), o.flows);
      }
      add(std::move(o));
    }
  }

  // ---- Context parallel and cross-host tensor parallel: exposed blocks. ----
  const int layer_instances = static_cast<int>(std::llround(r.layers_per_rank * m));
  if (l.cp > 1 && r.cp_buffer_elements > 0 && layer_instances > 0) {
    const auto groups = g.Along({ParallelAxis::kCp});
    for (bool forward : {true, false}) {
      const Collective coll = forward ? Collective::kAllGather : Collective::kReduceScatter;
      CommOp o = op(forward ? "cp.ag.fwd" : "cp.rs.bwd", ParallelAxis::kCp, coll, r.cp_dtype,
                    layer_instances, Pacing::kBurst, forward ? -1 : seg.bubble(),
                    forward ? seg.fwd(1) : seg.bwd(k));
      for (const auto& group : groups) {
        AddRingFlows(g, group, coll, r.cp_buffer_elements, r.cp_dtype, o.flows);
      }
      add(std::move(o));
    }
  }
  if (l.tp > l.gpus_per_host && r.tp_elements_per_layer > 0 && layer_instances > 0) {
    const auto groups = g.Along({ParallelAxis::kTp});
    for (bool forward : {true, false}) {
      CommOp o = op(forward ? "tp.ar.fwd" : "tp.ar.bwd", ParallelAxis::kTp, Collective::kAllReduce,
                    r.tp_dtype, 2 * layer_instances, Pacing::kBurst, forward ? -1 : seg.bubble(),
                    forward ? seg.fwd(1) : seg.bwd(k));
      for (const auto& group : groups) {
        AddRingFlows(g, group, Collective::kAllReduce, r.tp_elements_per_layer, r.tp_dtype,
                     o.flows);
      }
      add(std::move(o));
    }
  }
  return out;
}

// ---- Network work ----

namespace {

Status ValidateNetwork(const HostNetwork& net) {
  if (net.nics_per_host < 1) return InvalidArgumentError("network.nics_per_host: must be >= 1");
  if (!net.nic_bandwidth.IsPositive()) {
    return InvalidArgumentError("network.nic_bandwidth: must be > 0");
  }
  return Status::Ok();
}

}  // namespace

size_t GpuNicIndex(uint32_t gpu, uint32_t gpus, size_t nics) {
  return static_cast<size_t>(uint64_t{gpu} * nics / gpus);
}

namespace {

int NicOf(int gpu, int gpus_per_host, int nics) {
  return static_cast<int>(GpuNicIndex(
      static_cast<uint32_t>(gpu), static_cast<uint32_t>(gpus_per_host), static_cast<size_t>(nics)));
}

// Bytes per NIC and direction: [host * nics + nic] for egress, then the same for ingress.
class NicBytes {
 public:
  NicBytes(const IterationModel& m, int nics)
      : g_(m.layout.gpus_per_host),
        nics_(nics),
        bytes_(2 * static_cast<size_t>(m.layout.hosts()) * static_cast<size_t>(nics), 0.0) {}

  void Add(const std::vector<RailFlow>& flows, double times) {
    const size_t half = bytes_.size() / 2;
    for (const RailFlow& f : flows) {
      const double b = f.bytes.ToDouble() * times;
      bytes_[Index(f.src_host, f.src_gpu)] += b;
      bytes_[half + Index(f.dst_host, f.dst_gpu)] += b;
    }
  }
  double Max() const {
    double mx = 0;
    for (double b : bytes_) mx = std::max(mx, b);
    return mx;
  }

 private:
  size_t Index(int host, int gpu) const {
    return static_cast<size_t>(host) * static_cast<size_t>(nics_) +
           static_cast<size_t>(NicOf(gpu, g_, nics_));
  }
  int g_;
  int nics_;
  std::vector<double> bytes_;
};

double InstanceSeconds(const IterationModel& m, const CommOp& op, const HostNetwork& net) {
  NicBytes bytes(m, net.nics_per_host);
  bytes.Add(op.flows, 1.0);
  return bytes.Max() * 8.0 / net.nic_bandwidth.ToBitsPerSec();
}

}  // namespace

Duration InstanceWork(const IterationModel& m, const CommOp& op, const HostNetwork& net) {
  if (!ValidateNetwork(net).ok()) return Duration::Zero();
  return Duration::Seconds(InstanceSeconds(m, op, net));
}

// ---- TimeIteration ----

namespace {

constexpr double kTimeEps = 1e-12;

// The event-driven standalone timing (header). Times in double seconds. Transfers share the
// NICs by processor sharing, kept in virtual time: every active transfer has received the same
// service `virtual_` since it started, so a min-heap of finish points gives the next completion
// in O(log n) whatever the number of transfers in flight.
class IterationClock {
 public:
  // Segment durations are multiplied by compute_scale (calibration scales the compute without
  // copying the model).
  IterationClock(const IterationModel& m, const std::vector<double>& work, double scale,
                 double compute_scale)
      : m_(m), work_(work), scale_(scale), compute_scale_(compute_scale) {}

  Result<IterationTiming> Run() {
    const int n_seg = static_cast<int>(m_.segments.size());
    const int n_ops = static_cast<int>(m_.ops.size());
    seg_start_.assign(static_cast<size_t>(n_seg), -1);
    seg_end_.assign(static_cast<size_t>(n_seg), -1);
    op_.assign(static_cast<size_t>(n_ops), OpState{});
    waiting_.assign(static_cast<size_t>(n_seg) + 1, 0);
    issue_after_.assign(static_cast<size_t>(n_seg) + 1, {});
    paced_in_.assign(static_cast<size_t>(n_seg), {});
    dependents_.assign(static_cast<size_t>(n_ops), {});
    for (int i = 0; i < n_ops; ++i) {
      const CommOp& o = m_.ops[static_cast<size_t>(i)];
      if (o.issue_after < -1 || o.issue_after >= n_seg || o.needed_before < 0 ||
          o.needed_before > n_seg || o.needed_before <= o.issue_after || o.after_op >= i ||
          o.after_op < -1 || o.instances < 1) {
        return InvalidArgumentError("ops[" + std::to_string(i) + "] (" + o.name +
                                    "): bad window or dependency");
      }
      ++waiting_[static_cast<size_t>(o.needed_before)];
      issue_after_[static_cast<size_t>(o.issue_after + 1)].push_back(i);
      if (o.after_op >= 0) dependents_[static_cast<size_t>(o.after_op)].push_back(i);
      // Window compute of paced ops, and where each window segment starts inside it.
      double w = 0;
      for (int seg = o.issue_after + 1; seg < o.needed_before; ++seg) {
        if (o.pacing == Pacing::kPaced) paced_in_[static_cast<size_t>(seg)].push_back({i, w});
        w += SegSeconds(seg);
      }
      op_[static_cast<size_t>(i)].window = w;
    }
    SegmentEnded(-1);  // Iteration start.
    while (true) {
      TryStartSegment();
      if (done_) break;
      // Next event.
      double next = std::numeric_limits<double>::infinity();
      if (running_ >= 0) next = std::min(next, seg_end_[static_cast<size_t>(running_)]);
      if (!releases_.empty()) next = std::min(next, releases_.top().time);
      if (!active_.empty()) {
        next = std::min(next, now_ + (active_.top().finish - virtual_) *
                                         static_cast<double>(active_.size()) / scale_);
      }
      if (!std::isfinite(next)) {
        return InternalError(
            "iteration cannot complete: an op waits for a segment after the "
            "one that needs it");
      }
      Advance(next);
    }
    IterationTiming out;
    out.iteration = Duration::Seconds(now_);
    double busy = 0;
    double idle = 0;
    for (size_t seg = 0; seg < m_.segments.size(); ++seg) {
      (m_.segments[seg].busy ? busy : idle) += SegSeconds(static_cast<int>(seg));
    }
    out.busy = Duration::Seconds(busy);
    out.idle = Duration::Seconds(idle);
    out.exposed = std::max(Duration::Zero(), out.iteration - out.busy - out.idle);
    double network = 0;
    for (size_t i = 0; i < m_.ops.size(); ++i) network += work_[i] * m_.ops[i].instances;
    out.network = Duration::Seconds(network);
    for (double t : seg_start_) out.segment_start.push_back(Duration::Seconds(t));
    for (const OpState& o : op_) {
      out.ops.push_back(OpSpan{Duration::Seconds(o.first_release), Duration::Seconds(o.end)});
    }
    return out;
  }

 private:
  struct OpState {
    double window = 0;
    int released = 0;
    int completed = 0;
    bool issued = false;  // Its issue segment has ended.
    bool done = false;
    double first_release = -1;
    double end = -1;
  };
  struct Transfer {
    double finish;  // Virtual time at which it completes.
    uint64_t seq;   // Release order (deterministic ties).
    int op;
    bool operator>(const Transfer& o) const {
      return std::tie(finish, seq) > std::tie(o.finish, o.seq);
    }
  };
  struct PendingRelease {
    double time;
    int op;
    int count;
    bool operator>(const PendingRelease& o) const {
      return std::tie(time, op) > std::tie(o.time, o.op);
    }
  };
  struct PacedWindow {
    int op;
    double offset;  // Window compute before this segment.
  };

  double SegSeconds(int seg) const {
    return m_.segments[static_cast<size_t>(seg)].duration.ToSeconds() * compute_scale_;
  }

  bool OpReady(int i) const {
    const CommOp& o = m_.ops[static_cast<size_t>(i)];
    return op_[static_cast<size_t>(i)].issued &&
           (o.after_op < 0 || op_[static_cast<size_t>(o.after_op)].done);
  }

  void ReleaseInstances(int i, int count) {
    OpState& st = op_[static_cast<size_t>(i)];
    if (st.first_release < 0) st.first_release = now_;
    st.released += count;
    for (int c = 0; c < count; ++c) {
      if (work_[static_cast<size_t>(i)] <= kTimeEps) {
        Complete(i);
      } else {
        active_.push(Transfer{virtual_ + work_[static_cast<size_t>(i)], seq_++, i});
      }
    }
  }

  void Complete(int i) {
    OpState& st = op_[static_cast<size_t>(i)];
    ++st.completed;
    if (st.completed < m_.ops[static_cast<size_t>(i)].instances) return;
    st.done = true;
    st.end = now_;
    --waiting_[static_cast<size_t>(m_.ops[static_cast<size_t>(i)].needed_before)];
    for (int j : dependents_[static_cast<size_t>(i)]) Issue(j);
  }

  // Called when an op's issue condition may have become true.
  void Issue(int i) {
    if (!OpReady(i) || op_[static_cast<size_t>(i)].released > 0) return;
    const CommOp& o = m_.ops[static_cast<size_t>(i)];
    if (o.pacing == Pacing::kBurst || op_[static_cast<size_t>(i)].window <= kTimeEps) {
      ReleaseInstances(i, o.instances);
    }
    // Paced ops are released as their window's segments start (StartSegment).
  }

  void SegmentEnded(int seg) {
    for (int i : issue_after_[static_cast<size_t>(seg + 1)]) {
      op_[static_cast<size_t>(i)].issued = true;
      Issue(i);
    }
  }

  void StartSegment(int seg) {
    seg_start_[static_cast<size_t>(seg)] = now_;
    const double d = SegSeconds(seg);
    seg_end_[static_cast<size_t>(seg)] = now_ + d;
    running_ = seg;
    if (!(d > 0)) return;
    // Paced releases that fall inside this segment: instance j at j / n of the window.
    for (const PacedWindow& pw : paced_in_[static_cast<size_t>(seg)]) {
      const CommOp& o = m_.ops[static_cast<size_t>(pw.op)];
      const double window = op_[static_cast<size_t>(pw.op)].window;
      if (window <= kTimeEps) continue;
      const double n = o.instances;
      const int first = std::max(0, static_cast<int>(std::ceil(pw.offset / window * n - 1e-9)));
      for (int j = first; j < o.instances; ++j) {
        const double at = j / n * window;
        if (at >= pw.offset + d - kTimeEps) break;
        releases_.push(PendingRelease{now_ + (at - pw.offset), pw.op, 1});
      }
    }
  }

  void TryStartSegment() {
    while (running_ < 0 && !done_) {
      const int next = last_ended_ + 1;
      if (waiting_[static_cast<size_t>(next)] > 0) return;
      if (next == static_cast<int>(m_.segments.size())) {
        done_ = true;
        return;
      }
      StartSegment(next);
      if (seg_end_[static_cast<size_t>(next)] <= now_ + kTimeEps) EndSegment();
    }
  }

  void EndSegment() {
    const int seg = running_;
    running_ = -1;
    last_ended_ = seg;
    SegmentEnded(seg);
  }

  void Advance(double to) {
    const double dt = std::max(0.0, to - now_);
    now_ = to;
    // Transfers: each active one received dt * scale / n of service.
    if (!active_.empty()) {
      virtual_ += dt * scale_ / static_cast<double>(active_.size());
      const double eps = kTimeEps * std::max(1.0, virtual_);
      std::vector<int> finished;
      while (!active_.empty() && active_.top().finish <= virtual_ + eps) {
        finished.push_back(active_.top().op);
        active_.pop();
      }
      for (int op : finished) Complete(op);
    }
    // Releases due now.
    while (!releases_.empty() && releases_.top().time <= now_ + kTimeEps) {
      const PendingRelease r = releases_.top();
      releases_.pop();
      if (OpReady(r.op)) {
        ReleaseInstances(r.op, r.count);
      } else {
        deferred_.push_back(r);
      }
    }
    // Deferred paced releases whose op became ready (after_op completed).
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (OpReady(it->op)) {
        ReleaseInstances(it->op, it->count);
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
    if (running_ >= 0 && seg_end_[static_cast<size_t>(running_)] <= now_ + kTimeEps) {
      EndSegment();
    }
  }

  const IterationModel& m_;
  const std::vector<double>& work_;
  double scale_;
  double compute_scale_;
  double now_ = 0;
  double virtual_ = 0;
  uint64_t seq_ = 0;
  int running_ = -1;
  int last_ended_ = -1;
  bool done_ = false;
  std::vector<double> seg_start_;
  std::vector<double> seg_end_;
  std::vector<OpState> op_;
  std::vector<int> waiting_;  // Per segment (and the end): ops not yet done that it waits for.
  std::vector<std::vector<int>> issue_after_;       // [segment + 1]: ops issued after it.
  std::vector<std::vector<PacedWindow>> paced_in_;  // Per segment: paced ops whose window has it.
  std::vector<std::vector<int>> dependents_;        // Per op: ops chained after it.
  std::priority_queue<Transfer, std::vector<Transfer>, std::greater<Transfer>> active_;
  std::priority_queue<PendingRelease, std::vector<PendingRelease>, std::greater<PendingRelease>>
      releases_;
  std::vector<PendingRelease> deferred_;
};

}  // namespace

namespace {

// Seconds of NIC time per instance of every op.
std::vector<double> OpWork(const IterationModel& m, const HostNetwork& net) {
  std::vector<double> work;
  work.reserve(m.ops.size());
  for (const CommOp& op : m.ops) work.push_back(InstanceSeconds(m, op, net));
  return work;
}

Result<IterationTiming> TimeWithWork(const IterationModel& m, const std::vector<double>& work,
                                     double bandwidth_scale, double compute_scale = 1.0) {
  IterationClock clock(m, work, bandwidth_scale, compute_scale);
  return clock.Run();
}

}  // namespace

Result<IterationTiming> TimeIteration(const IterationModel& m, const HostNetwork& net,
                                      double bandwidth_scale) {
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  if (!std::isfinite(bandwidth_scale) || !(bandwidth_scale > 0)) {
    return InvalidArgumentError("bandwidth_scale: must be finite and > 0 (got " +
                                Num(bandwidth_scale) + ")");
  }
  return TimeWithWork(m, OpWork(m, net), bandwidth_scale);
}

Result<Duration> CalibrateCompute(const TrainingRecipe& recipe, const HostNetwork& net,
                                  Duration target) {
  if (!(target > Duration::Zero()) || target.IsInfinite()) {
    return InvalidArgumentError("target: must be > 0 and finite");
  }
  TrainingRecipe unit_recipe = recipe;
  unit_recipe.compute = Duration::Seconds(1);
  CRUX_ASSIGN_OR_RETURN(const IterationModel unit, BuildIteration(unit_recipe));
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  const std::vector<double> work = OpWork(unit, net);
  auto iteration = [&](double c) -> Result<double> {
    CRUX_ASSIGN_OR_RETURN(const IterationTiming t, TimeWithWork(unit, work, 1.0, c));
    return t.iteration.ToSeconds();
  };
  const double goal = target.ToSeconds();
  CRUX_ASSIGN_OR_RETURN(const double at_zero, iteration(0));
  if (at_zero >= goal) {
    return FailedPreconditionError("the communication alone takes " + Num(at_zero) + " s at " +
                                   Num(net.nic_bandwidth.ToGbps()) +
                                   " Gbps per NIC, not less than the target iteration " +
                                   Num(goal) + " s");
  }
  double lo = 0;
  double hi = goal;
  for (int i = 0; i < 60 && hi - lo > 1e-9 * goal; ++i) {
    const double mid = 0.5 * (lo + hi);
    CRUX_ASSIGN_OR_RETURN(const double t, iteration(mid));
    (t <= goal ? lo : hi) = mid;
  }
  return Duration::Seconds(lo);
}

// ---- Summary ----

Result<IterationSummary> SummarizeIteration(const IterationModel& m, const HostNetwork& net) {
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  const std::vector<double> work = OpWork(m, net);
  CRUX_ASSIGN_OR_RETURN(const IterationTiming base, TimeWithWork(m, work, 1.0));
  IterationSummary s;
  s.work = m.work;
  s.busy = base.busy;
  s.compute = base.busy + base.idle;
  s.iteration = base.iteration;
  s.exposed = base.exposed;
  NicBytes bytes(m, net.nics_per_host);
  for (const CommOp& op : m.ops) bytes.Add(op.flows, op.instances);
  const double nic_bytes = bytes.Max();
  s.nic_bytes = Bytes::FromDouble(nic_bytes);
  const double t = nic_bytes * 8.0 / net.nic_bandwidth.ToBitsPerSec();
  s.comm = Duration::Seconds(t);
  const double c = s.compute.ToSeconds();
  const double it = s.iteration.ToSeconds();
  if (!(c > 0)) {
    s.overlap_start = 0;
    return s;
  }
  if (it > c * (1 + 1e-9) + 1e-9 || !(t > 0)) {
    s.stretch_slack = 1;
    s.overlap_start = std::clamp((it - t) / c, 0.0, 1.0);
    if (!(t > 0)) s.overlap_start = 1.0;
    return s;
  }
  // Hidden: the largest uniform slow-down that keeps the iteration at c. At slow-down x the
  // network needs x t seconds, so x <= c / t.
  double lo = 1;
  double hi = std::max(1.0, c / t);
  for (int i = 0; i < 40 && hi - lo > 1e-6 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    CRUX_ASSIGN_OR_RETURN(const IterationTiming x, TimeWithWork(m, work, 1.0 / mid));
    (x.iteration.ToSeconds() <= it * (1 + 1e-9) + 1e-9 ? lo : hi) = mid;
  }
  s.stretch_slack = lo;
  s.overlap_start = std::clamp(1.0 - lo * t / c, 0.0, 1.0);
  return s;
}

Duration SingleOverlapIteration(const IterationSummary& s, double bandwidth_scale) {
  const double c = s.compute.ToSeconds();
  const double t = bandwidth_scale > 0 ? s.comm.ToSeconds() / bandwidth_scale : 0;
  return Duration::Seconds(std::max(c, s.overlap_start * c + t));
}

// ---- Topology mapping ----

namespace {

Result<NodeId> EndpointOf(const Topology& topo, NodeId host, int gpu, int gpus_per_host) {
  const std::vector<NodeId>& nics = topo.NicsOf(host);
  if (nics.empty()) return host;
  return nics[static_cast<size_t>(NicOf(gpu, gpus_per_host, static_cast<int>(nics.size())))];
}

}  // namespace

Result<std::vector<FlowDemand>> IterationFlows(const Topology& topo,
                                               const std::vector<NodeId>& hosts,
                                               const IterationModel& m) {
  if (static_cast<int>(hosts.size()) != m.layout.hosts()) {
    return InvalidArgumentError("hosts: the layout needs " + std::to_string(m.layout.hosts()) +
                                " hosts (got " + std::to_string(hosts.size()) + ")");
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!hosts[i].valid() || hosts[i].value() >= topo.num_nodes() ||
        topo.node(hosts[i]).kind != NodeKind::kHost) {
      return InvalidArgumentError("hosts[" + std::to_string(i) + "]: not a host of the topology");
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, double> sum;
  for (const CommOp& op : m.ops) {
    for (const RailFlow& f : op.flows) {
      CRUX_ASSIGN_OR_RETURN(const NodeId src,
                            EndpointOf(topo, hosts[static_cast<size_t>(f.src_host)], f.src_gpu,
                                       m.layout.gpus_per_host));
      CRUX_ASSIGN_OR_RETURN(const NodeId dst,
                            EndpointOf(topo, hosts[static_cast<size_t>(f.dst_host)], f.dst_gpu,
                                       m.layout.gpus_per_host));
      sum[{src.value(), dst.value()}] += f.bytes.ToDouble() * op.instances;
    }
  }
  std::vector<FlowDemand> out;
  out.reserve(sum.size());
  for (const auto& [key, bytes] : sum) {
    const Bytes b = Bytes::FromDouble(bytes);
    if (b.count() > 0) out.push_back(FlowDemand{NodeId(key.first), NodeId(key.second), b});
  }
  return out;
}

Result<JobSpec> SingleOverlapJobSpec(const Topology& topo, std::string id,
                                     const std::vector<NodeId>& hosts, const IterationModel& m) {
  CRUX_ASSIGN_OR_RETURN(std::vector<FlowDemand> flows, IterationFlows(topo, hosts, m));
  HostNetwork net;
  net.nics_per_host = 1;
  net.nic_bandwidth = Bandwidth::Gbps(400);
  if (!hosts.empty()) {
    const std::vector<NodeId>& nics = topo.NicsOf(hosts[0]);
    const NodeId end = nics.empty() ? hosts[0] : nics[0];
    int64_t bps = 0;
    for (LinkId l : topo.OutLinks(end)) {
      if (IsNetworkSwitch(topo.node(topo.link(l).dst).kind))
        bps += topo.link(l).capacity.bits_per_sec();
    }
    net.nics_per_host = std::max<int>(1, static_cast<int>(nics.size()));
    if (bps > 0) net.nic_bandwidth = Bandwidth::BitsPerSec(bps);
  }
  CRUX_ASSIGN_OR_RETURN(const IterationSummary s, SummarizeIteration(m, net));
  JobSpec j;
  j.id = std::move(id);
  j.hosts = hosts;
  j.gpus_per_host = std::min(m.layout.gpus_per_host, m.layout.gpus());
  j.compute_time = s.compute;
  j.flops_per_iteration = s.work;
  j.overlap_start = s.overlap_start;
  j.pattern = TrafficPattern::kExplicit;
  j.flows = std::move(flows);
  return j;
}

}  // namespace crux::core
