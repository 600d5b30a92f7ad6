#include "aggregator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace crux::nccl_profiler {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The protocol's limit on a communicator's bytes per iteration (1 PiB).
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;
// GPU globaltimer readings above this (73 years) are not readings: ignored, so that shifting a
// host time by a GPU - host offset cannot overflow int64.
constexpr uint64_t kMaxGpuNs = uint64_t{1} << 61;

// Byte sums saturate (NCCL's sizes are size_t; a wrapped sum would shrink).
void AddSaturating(uint64_t& sum, uint64_t v) {
  sum = v > std::numeric_limits<uint64_t>::max() - sum ? std::numeric_limits<uint64_t>::max()
                                                       : sum + v;
}

uint64_t ClampBytes(double b) {
  if (!(b > 0)) return 0;  // Also NaN.
  if (b >= static_cast<double>(kMaxBytes)) return kMaxBytes;
  return static_cast<uint64_t>(b);
}

}  // namespace

uint32_t DatatypeSize(std::string_view d) {
  if (StartsWith(d, "nccl")) d.remove_prefix(4);
  if (d == "Int8" || d == "Uint8" || d == "Char" || d == "Float8e4m3" || d == "Float8e5m2") {
    return 1;
  }
  if (d == "Float16" || d == "Half" || d == "Bfloat16") return 2;
  if (d == "Int32" || d == "Uint32" || d == "Int" || d == "Float32" || d == "Float") return 4;
  if (d == "Int64" || d == "Uint64" || d == "Float64" || d == "Double") return 8;
  return 0;
}

uint64_t EstimatedWireBytes(std::string_view func, uint64_t count, uint32_t type_size, int nranks) {
  const double s = static_cast<double>(count) * type_size;
  const double n = nranks;
  double b = 0;
  if (func == "Send") {
    b = s;
  } else if (func == "Recv" || nranks <= 1) {
    b = 0;
  } else if (func == "AllReduce") {
    b = 2 * (n - 1) / n * s;
  } else if (func == "AllGather" || func == "ReduceScatter" || func == "AlltoAll") {
    b = (n - 1) * s;
  } else {  // Broadcast, Reduce, Gather, Scatter, SendRecv and anything newer: one pass.
    b = (n - 1) / n * s;
  }
  return ClampBytes(b);
}

Aggregator::Aggregator(AggregatorOptions options)
    : options_(std::move(options)), profiler_(options_.profiler, 0, 0) {}

std::optional<uint32_t> Aggregator::CommIndex(const void* key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

void Aggregator::AddComm(const void* key, const hostd::CommInfo& info) {
  if (comms_.size() >= options_.max_comms) return;  // Its records count as orphans.
  by_key_[key] = static_cast<uint32_t>(comms_.size());
  Comm c;
  c.info = info;
  c.info.alive = true;
  comms_.push_back(std::move(c));
}

void Aggregator::RemoveComm(const void* key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  comms_[it->second].info.alive = false;
  by_key_.erase(it);  // The context pointer may be reused by a new communicator.
}

bool Aggregator::SampledSince(int64_t host_ns) const {
  return window_open_since_.has_value() && *window_open_since_ <= host_ns;
}

void Aggregator::SamplingStarted(int64_t now_ns) { window_open_since_ = now_ns; }

void Aggregator::SamplingEnded(int64_t /*now_ns*/) {
  if (!window_open_since_) return;
  window_open_since_.reset();
  ++windows_ended_;
  split_changed_ = true;
}

void Aggregator::StartTask(const Record& r) {
  auto idx = CommIndex(r.comm);
  if (!idx) {
    ++orphans_;
    return;
  }
  Comm& c = comms_[*idx];
  const std::string_view func = r.func != nullptr ? std::string_view(r.func) : "";
  uint32_t size = DatatypeSize(r.datatype != nullptr ? std::string_view(r.datatype) : "");
  if (size == 0) size = 1;  // Unknown datatype: count elements as bytes (a lower bound).
  Task t;
  t.comm = *idx;
  t.bytes = EstimatedWireBytes(func, r.value, size, c.info.nranks);
  t.host_ns = r.t_ns;
  t.channels = std::max<uint32_t>(1, r.channels);
  // A peer outside the communicator names nobody.
  if (r.is_p2p && func == "Send" && r.peer >= 0 && r.peer < c.info.nranks) {
    AddSaturating(c.p2p_to[r.peer], t.bytes);
  }
  if (tasks_.size() >= options_.max_open_tasks) {
    while (!task_order_.empty()) {
      uint64_t oldest = task_order_.front();
      task_order_.pop_front();
      auto it = tasks_.find(oldest);
      if (it != tasks_.end()) {
        Close(oldest, it->second);
        tasks_.erase(it);
        break;
      }
    }
  }
  tasks_.emplace(r.id, t);
  task_order_.push_back(r.id);
}

void Aggregator::Close(uint64_t /*id*/, Task& t) {
  Comm& c = comms_[t.comm];
  // Records are consumed before the plugin closes a window, so a window still open here was
  // open when the task's last event happened.
  if (t.proxy_seen || SampledSince(t.host_ns)) AddSaturating(c.sampled_estimate, t.bytes);
  int64_t start = 0;
  int64_t end = 0;
  if (t.gpu_end > 0 && t.gpu_start > 0) {
    start = t.gpu_start;
    end = std::max(t.gpu_start, t.gpu_end);
    const int64_t off = t.gpu_start - t.host_ns;
    if (!c.have_offset || off < c.gpu_minus_host) {
      c.gpu_minus_host = off;
      c.have_offset = true;
    }
  } else {
    start = t.host_ns + (c.have_offset ? c.gpu_minus_host : 0);
    end = start;
  }
  client::internal::Event e;
  e.kind = client::internal::EventKind::kComm;
  e.t_ns = start;
  e.t2_ns = end;
  e.bytes = t.bytes;
  e.peer = t.comm;
  profiler_.Consume(e);
  ++collectives_;
}

void Aggregator::Consume(const Record& r) {
  ++records_;
  switch (r.kind) {
    case RecordKind::kTaskStart:
      StartTask(r);
      return;
    case RecordKind::kKernelStart:
    case RecordKind::kKernelStop: {
      auto it = tasks_.find(r.id);
      if (it == tasks_.end() || r.value > kMaxGpuNs) {
        ++orphans_;
        return;
      }
      Task& t = it->second;
      const auto gpu = static_cast<int64_t>(r.value);
      if (r.kind == RecordKind::kKernelStart) {
        if (t.gpu_start == 0 || gpu < t.gpu_start) t.gpu_start = gpu;
        return;
      }
      t.gpu_end = std::max(t.gpu_end, gpu);
      if (++t.stops >= t.channels) {
        Close(r.id, t);
        tasks_.erase(it);
      }
      return;
    }
    case RecordKind::kProxyOpStart: {
      auto idx = CommIndex(r.comm);
      if (!idx) {
        ++orphans_;
        return;
      }
      if (ops_.size() >= options_.max_open_ops && !op_order_.empty()) {
        ops_.erase(op_order_.front());
        op_order_.pop_front();
      }
      // A peer outside the communicator: its steps' bytes are orphans.
      const int peer = r.peer >= 0 && r.peer < comms_[*idx].info.nranks ? r.peer : -1;
      ops_[r.id] = Op{*idx, peer};
      op_order_.push_back(r.id);
      if (r.parent != 0) {
        auto task = tasks_.find(r.parent);
        if (task != tasks_.end()) task->second.proxy_seen = true;
      }
      return;
    }
    case RecordKind::kSendBytes: {
      auto it = ops_.find(r.id);
      if (it == ops_.end() || it->second.peer < 0) {
        ++orphans_;
        return;
      }
      Comm& c = comms_[it->second.comm];
      AddSaturating(c.sampled_sent, r.value);
      AddSaturating(c.sent_to[it->second.peer], r.value);
      return;
    }
  }
}

void Aggregator::Expire(int64_t now_ns) {
  while (!task_order_.empty()) {
    const uint64_t id = task_order_.front();
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {  // Closed by its kernel events.
      task_order_.pop_front();
      continue;
    }
    if (now_ns - it->second.host_ns < options_.task_timeout_ns) break;
    Close(id, it->second);
    tasks_.erase(it);
    task_order_.pop_front();
  }
  // Ops only live as long as their steps can arrive; the oldest go first when over the cap.
}

std::optional<uint64_t> Aggregator::WorldCommHash() const {
  const Comm* best = nullptr;
  for (const auto& c : comms_) {
    if (best == nullptr || c.info.nranks > best->info.nranks) best = &c;
  }
  if (best == nullptr) return std::nullopt;
  return best->info.hash;
}

std::vector<hostd::CommInfo> Aggregator::comms() const {
  std::vector<hostd::CommInfo> out;
  out.reserve(comms_.size());
  for (const auto& c : comms_) out.push_back(c.info);
  return out;
}

hostd::RankProfile Aggregator::Build(const std::string& job_id) const {
  const client::Profile& p = *last_profile_;
  hostd::RankProfile rp;
  rp.job_id = job_id;
  rp.period_ns = p.iteration_period_ns;
  rp.comm_ns = p.comm_time_ns;
  rp.compute_ns = p.compute_time_ns;
  rp.samples = p.samples;
  rp.converged = p.converged;
  for (size_t i = 0; i < p.peers.size() && i < last_index_.size(); ++i) {
    const uint32_t idx = last_index_[i];
    if (idx >= comms_.size()) continue;
    const Comm& c = comms_[idx];
    hostd::CommBytes cb;
    cb.hash = c.info.hash;
    double bytes = static_cast<double>(p.peers[i].bytes);
    const std::map<int, uint64_t>* split = nullptr;
    if (c.sampled_estimate > 0 && windows_ended_ > 0) {
      // Real bytes per estimated byte over the sampled tasks.
      bytes *= static_cast<double>(c.sampled_sent) / static_cast<double>(c.sampled_estimate);
      if (c.sampled_sent > 0) split = &c.sent_to;
    } else if (!c.p2p_to.empty()) {
      split = &c.p2p_to;
    }
    bytes = static_cast<double>(ClampBytes(bytes));
    cb.bytes = ClampBytes(bytes);
    if (split != nullptr) {
      double total = 0;
      for (const auto& [peer, b] : *split) total += static_cast<double>(b);
      for (const auto& [peer, b] : *split) {
        if (cb.peers.size() >= hostd::kMaxPeersPerComm || !(total > 0)) break;
        cb.peers.push_back({peer, ClampBytes(bytes * static_cast<double>(b) / total)});
      }
    }
    if (rp.comms.size() < hostd::kMaxCommsPerProfile) rp.comms.push_back(std::move(cb));
  }
  return rp;
}

bool Aggregator::MateriallyDifferent(const hostd::RankProfile& a,
                                     const hostd::RankProfile& b) const {
  if (a.comms.size() != b.comms.size()) return true;
  for (size_t i = 0; i < a.comms.size(); ++i) {
    const auto& x = a.comms[i];
    const auto& y = b.comms[i];
    if (x.hash != y.hash || x.peers.size() != y.peers.size()) return true;
    const double base = std::max<double>(1, static_cast<double>(y.bytes));
    if (std::abs(static_cast<double>(x.bytes) - static_cast<double>(y.bytes)) / base >
        options_.resend_change) {
      return true;
    }
  }
  return false;
}

std::optional<hostd::RankProfile> Aggregator::TakeProfile(const std::string& job_id) {
  std::vector<client::PeerId> index;
  bool fresh = false;
  if (auto p = profiler_.TakeReport(&index)) {
    last_profile_ = std::move(p);
    last_index_ = std::move(index);
    fresh = true;
  }
  if (!last_profile_) return std::nullopt;
  const bool split_changed = split_changed_;
  split_changed_ = false;
  if (!fresh && !split_changed) return std::nullopt;
  hostd::RankProfile rp = Build(job_id);
  if (!fresh && last_sent_ && !MateriallyDifferent(rp, *last_sent_)) return std::nullopt;
  last_sent_ = rp;
  return rp;
}

}  // namespace crux::nccl_profiler
