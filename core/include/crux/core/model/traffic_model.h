// Multi-phase training iterations: what one iteration of a 2024-2026 LLM training job does on
// the network, phase by phase, and how the planner's per-job summary follows from it.
//
// Today's core::JobSpec describes an iteration as one compute block and one communication
// block that may start after overlap_start of the compute (Crux's model, priority.h). Hybrid
// parallel jobs do not look like that: data-parallel rings burst at the start and the end of
// the iteration, pipeline transfers trickle through the steady state, expert-parallel
// all-to-alls burst at every MoE layer and micro-batch, context-parallel all-gathers sit on the
// critical path. This header models an iteration as
//   * a sequence of compute segments (busy GPU time, or idle time of the pipeline bubble), and
//   * communication operations, each a collective over one parallel group, with its bytes on
//     the wire (explicit dtype), the segment after which it may start, the segment that waits
//     for it, and how its instances are released (all at once, or paced with the compute),
// and builds that iteration from a training recipe (BuildIteration). The later stages have
// their own headers:
//   iteration_timing.h   times the iteration on the job's NICs (TimeIteration) and fits the
//                        recipe's compute to a measured iteration time (CalibrateCompute);
//   iteration_summary.h  derives the quantities Crux's planner uses (W_j, bytes per NIC and per
//                        link, t_j) plus the single-overlap equivalent that today's engine and
//                        pair simulation consume.
// docs/sim-workloads.md ("Multi-phase iterations") has the byte maths with their sources and
// says what the single-overlap formula loses.
//
// ---- Placement and groups ----
// Ranks are laid out on whole hosts of G GPUs in rank order (rank r on local GPU r % G of host
// r / G of the job's host list), with the parallel dimensions nested innermost first in one of
// two orders: Megatron-LM's tp-cp-dp-pp (default) or Llama 3's tp-cp-pp-dp (Llama 3 §3.3.2).
// Expert parallelism is carved out of data parallelism (Megatron-Core, DeepSeek-V3): an EP
// group is `ep` consecutive members of a DP group; the ranks holding the same expert shard
// (expert data parallelism) are the DP members `ep` apart. A group's hosts are the distinct
// hosts of its members in rank order; its local members are those on one host. Every
// inter-host byte of this model travels rail-aligned: the j-th local member of a group on one
// host talks to the j-th local member on another (NCCL rings per rail; PXN forwarding for
// all-to-all; Megatron's scatter/gather for pipeline transfers). GPU g of a host uses NIC
// g * N / G of its N NICs (GpuNicIndex).
//
// ---- Byte maths (per iteration; b = bytes per element of the op's wire dtype) ----
// Ring collectives are hierarchical (reduce over NVLink first; workloads-2025.md §1.1): a group
// with buffer S_g (elements held by every member before the collective) spread over H hosts
// with k local members per host runs k inter-host rings, one per local member's rail, each
// carrying S_g / k; each ring edge carries c (H - 1) / H of it, c = 2 for all-reduce and 1 for
// reduce-scatter and all-gather. So a host sends c (H - 1) / H * S_g * b per group to the
// next host of the ring (RingHostBytes). H = 1: nothing on the network.
//   DP (sharding kNone):  all-reduce of the gradients, S_g = dense_params_per_rank (grad dtype).
//   DP (kZero1: ZeRO-1/2, FSDP without reshard after forward): reduce-scatter of gradients
//       (grad dtype) + all-gather of parameters (param dtype) = the bytes of one all-reduce
//       when both dtypes are equal (ZeRO §7.2.1); Llama 3 reduce-scatters in FP32.
//   DP (kZero3): all-gather in forward and again in backward + reduce-scatter: 1.5x (ZeRO
//       §7.2.2). With cp > 1 the dense gradients are reduced over the cp x dp ranks (the
//       distributed optimizer's group). Expert parameters (expert_params_per_rank) are synced
//       the same way over the expert-data-parallel group (dp / ep members).
//       Each DP op is split into dp_buckets equal buckets (see windows below).
//   PP:  per micro-batch, per virtual chunk, per stage boundary, one transfer of
//       pp_elements_per_transfer / tp elements per GPU each way (Megatron §3.2, §4.1: bsh/t with
//       the scatter/gather optimisation): 2 m v transfers per GPU per iteration. With v > 1
//       the last stage also sends to the first (interleaved schedule), m (v - 1) times.
//   EP:  per MoE layer per micro-batch, four all-to-alls (dispatch and combine, forward and
//       backward; DeepSeek-V3 §3.2.1). Each GPU sends ep_tokens_per_microbatch x ep_fanout
//       copies of a hidden vector (ep_hidden elements); the copies spread uniformly over the
//       EP group's members, so the share that leaves the host is (n - k) / n for n members with
//       k on the host: (H - 1) / H when spread evenly. ep_fanout is the distinct destinations
//       per token: nodes under node-limited routing with per-node dedup (DeepSeek-V3 §3.2.2),
//       experts for plain top-k.
//   CP:  per layer per micro-batch, an all-gather of K and V (cp_buffer_elements = sequence x
//       2 x kv heads per TP rank x head dim) in forward and the matching reduce-scatter of dK,
//       dV in backward (Llama 3 §3.3.2).
//   TP:  only when a TP group spans hosts: per layer per micro-batch two all-reduces forward
//       and two backward of tp_elements_per_layer (= b s h; Megatron §3.2: 8bsh(t-1)/t per
//       layer per micro-batch per device).
//
// ---- Segments and windows ----
// Segments of one iteration, as seen by pipeline stage 0, the critical stage (first to start,
// last to finish): fwd[1..K] (busy), bubble (idle), bwd[K..1] (busy), with K = dp_buckets, the
// forward taking forward_share of the busy compute C, and the 1F1B bubble B = C (p - 1) / (v m)
// (Megatron §2.2.1-2.2.2). Stage 0 idles between its forwards and its backwards while the last
// micro-batch travels to the last stage and its gradient comes back (the GPipe-equivalent view
// of 1F1B: same bubble; Megatron §2.2). Windows:
//   DP gradient bucket i (reduce-scatter / all-reduce): after bwd[i], needed by the end of the
//     iteration (optimizer step): the last one, after bwd[1], cannot be hidden (MegaScale §3.2).
//   DP parameter all-gather bucket i (ZeRO-1/2 after the step, ZeRO-3 forward): from the
//     iteration start, needed before fwd[i]: the first one is exposed (MegaScale §3.2). ZeRO-3
//     backward all-gather bucket i: after the forward, needed before bwd[i].
//   PP: the critical path through the pipeline crosses every boundary once forward (a chain of
//     p - 1 single transfers after fwd[K], before the bubble) and once backward (a chain after
//     the bubble, before bwd[K]); the other transfers are paced over the forward (activations)
//     and backward (gradients) compute (MegaScale §3.2: only warm-up and cool-down exposed).
//   EP: forward all-to-alls paced over the forward compute, backward ones over the backward
//     (DualPipe-style overlap: hidden while they fit, DeepSeek-V3 §3.2.1).
//   CP and cross-host TP: on the critical path by design, modelled as one exposed block before
//     fwd[1] (forward) and before bwd[K] (backward).
// A paced op of n instances releases instance i when i / n of its window's compute has run.
// iteration_timing.h says how the segments and ops are timed, and what the timing leaves out.
//
// Thread-safety: pure functions; the types are values.
#ifndef CRUX_CORE_MODEL_TRAFFIC_MODEL_H_
#define CRUX_CORE_MODEL_TRAFFIC_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::core {

// ---- Vocabulary ----

enum class WireDtype { kFp8, kBf16, kFp16, kFp32 };
int BytesPerElement(WireDtype d);             // 1, 2, 2, 4.
std::string_view WireDtypeName(WireDtype d);  // "fp8", "bf16", "fp16", "fp32".
Result<WireDtype> ParseWireDtype(std::string_view name);

enum class ParallelAxis { kTp, kCp, kEp, kDp, kPp };
std::string_view ParallelAxisName(ParallelAxis a);  // "tp", "cp", "ep", "dp", "pp".

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kSendRecv };
std::string_view CollectiveName(Collective c);

enum class DpSharding {
  kNone,   // Plain data parallel: all-reduce of the gradients.
  kZero1,  // ZeRO-1/2, FSDP without reshard: reduce-scatter gradients + all-gather parameters.
  kZero3,  // ZeRO-3 / FSDP: all-gather forward + all-gather backward + reduce-scatter.
};
std::string_view DpShardingName(DpSharding s);  // "none", "zero1", "zero3".
Result<DpSharding> ParseDpSharding(std::string_view name);

enum class RankOrder {
  kTpCpDpPp,  // Megatron-LM's default: pipeline stages outermost.
  kTpCpPpDp,  // Llama 3 (§3.3.2): data parallel outermost.
};

// ---- Byte maths (hand-checkable building blocks) ----

// Bytes one host sends to the next host of the ring, per group, for a hierarchical ring
// collective of `buffer_elements` per member over `hosts` hosts: c (H - 1) / H * S_g * b.
// REQUIRES: collective is all-reduce, reduce-scatter or all-gather; hosts >= 1.
Bytes RingHostBytes(Collective c, double buffer_elements, int hosts, WireDtype dtype);

// Share of a GPU's all-to-all copies that leave its host when they spread uniformly over
// `members` group members of which `local` are on its host: (members - local) / members.
double RemoteShare(int members, int local);

// ---- Layout and recipe ----

// Bounds ValidateRecipe enforces so that no input can make an iteration expensive to build or
// time: GPUs per job, pipeline stages, and instances of one op (micro-batches x virtual chunks,
// layers x micro-batches); dp_buckets x GPUs is at most 16 x kMaxIterationGpus.
inline constexpr int kMaxIterationGpus = 65536;
inline constexpr int kMaxPipelineStages = 1024;
inline constexpr int kMaxOpInstances = 20000;

struct ParallelLayout {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;  // Divides dp (experts are spread over ep consecutive DP members).
  int vp = 1;  // Virtual pipeline chunks per rank (interleaved 1F1B), >= 1.
  int gpus_per_host = 8;
  RankOrder order = RankOrder::kTpCpDpPp;

  int gpus() const { return tp * cp * pp * dp; }
  int hosts() const { return (gpus() + gpus_per_host - 1) / gpus_per_host; }

  friend bool operator==(const ParallelLayout&, const ParallelLayout&) = default;
};

// What a training job does per iteration. Element counts are logical (before the dtype);
// counts "per micro-batch" are for one micro-batch of one pipeline. See the file comment.
struct TrainingRecipe {
  ParallelLayout layout;
  int micro_batches = 1;  // m: micro-batches per pipeline per iteration (gradient accumulation).
  Duration compute;       // C: busy GPU time of one stage per iteration (no bubble, no comm).
  double forward_share = 1.0 / 3.0;  // Of C; backward ~ 2x forward.
  int dp_buckets = 1;                // K >= 1: DP traffic buckets (and fwd/bwd chunks).
  Flops work_per_gpu;                // Model FLOPs one GPU does per iteration (W_j / GPUs).

  DpSharding sharding = DpSharding::kZero1;
  double dense_params_per_rank = 0;   // Parameters one rank holds before DP sharding.
  double expert_params_per_rank = 0;  // Expert parameters per rank (synced over dp / ep ranks).
  WireDtype param_dtype = WireDtype::kBf16;
  WireDtype grad_dtype = WireDtype::kBf16;

  double pp_elements_per_transfer = 0;  // b s h per micro-batch (sent as 1/tp per GPU).
  WireDtype pp_dtype = WireDtype::kBf16;

  double moe_layers_per_rank = 0;       // MoE layers per pipeline rank (all chunks; may be a mean).
  double ep_tokens_per_microbatch = 0;  // Tokens one GPU routes per MoE layer per micro-batch.
  double ep_fanout = 0;                 // Destinations per token (nodes or experts).
  double ep_hidden = 0;                 // Elements per routed token copy.
  WireDtype ep_dispatch_dtype = WireDtype::kBf16;  // Forward dispatch (DeepSeek-V3: FP8).
  WireDtype ep_combine_dtype = WireDtype::kBf16;   // Forward combine.
  WireDtype ep_backward_dtype = WireDtype::kBf16;  // Both backward all-to-alls.

  double layers_per_rank = 0;     // Transformer layers per pipeline rank (CP, TP).
  double cp_buffer_elements = 0;  // K and V gathered per layer per micro-batch per GPU.
  WireDtype cp_dtype = WireDtype::kBf16;
  double tp_elements_per_layer = 0;  // b s h per micro-batch (cross-host TP only).
  WireDtype tp_dtype = WireDtype::kBf16;
};

// Errors name the field ("layout.ep: must divide dp (got 3, dp 8)"); see the bounds above.
Status ValidateRecipe(const TrainingRecipe& r);

// ---- The iteration ----

struct ComputeSegment {
  std::string name;  // "fwd1", ..., "bubble", ..., "bwd1".
  Duration duration;
  bool busy = true;  // false: the GPUs idle by schedule (pipeline bubble).

  friend bool operator==(const ComputeSegment&, const ComputeSegment&) = default;
};

// Inter-host bytes of one instance of an op, between local GPUs of two of the job's hosts
// (indices into the job's host list), on the wire.
struct RailFlow {
  int src_host = 0;
  int src_gpu = 0;
  int dst_host = 0;
  int dst_gpu = 0;
  Bytes bytes;

  friend bool operator==(const RailFlow&, const RailFlow&) = default;
};

enum class Pacing {
  kBurst,  // Every instance is released at once when the op may start.
  kPaced,  // Instance i is released when i / instances of the window's compute has run.
};

struct CommOp {
  std::string name;  // "dp.rs.bucket1", "pp.fwd", "pp.fill3", "ep.dispatch.fwd", ...
  ParallelAxis axis = ParallelAxis::kDp;
  Collective collective = Collective::kAllReduce;
  WireDtype dtype = WireDtype::kBf16;
  int instances = 1;  // >= 1 identical transfers per iteration.
  Pacing pacing = Pacing::kBurst;
  int issue_after = -1;         // Segment after whose end it may start; -1: iteration start.
  int needed_before = 0;        // Segment that waits for it; segments.size(): the iteration end.
  int after_op = -1;            // Op that must complete first (-1: none). Precedes this op.
  std::vector<RailFlow> flows;  // One instance.

  friend bool operator==(const CommOp&, const CommOp&) = default;
};

struct IterationModel {
  ParallelLayout layout;
  Flops work;  // W_j per iteration, all GPUs.
  std::vector<ComputeSegment> segments;
  std::vector<CommOp> ops;  // Ops with no inter-host bytes are left out.

  friend bool operator==(const IterationModel&, const IterationModel&) = default;
};

// Builds the iteration of `recipe` (file comment). Errors: ValidateRecipe's.
Result<IterationModel> BuildIteration(const TrainingRecipe& recipe);

// The rail-aligned GPU -> NIC rule every part of Crux uses: GPU `gpu` of a host with `gpus` GPUs
// uses NIC floor(gpu * nics / gpus) of its `nics` NICs (in Topology::NicsOf order): 8 GPUs on 8
// NICs one each, on 4 NICs two per NIC. REQUIRES: gpu < gpus, nics >= 1. Returns an index < nics.
size_t GpuNicIndex(uint32_t gpu, uint32_t gpus, size_t nics);

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_TRAFFIC_MODEL_H_
