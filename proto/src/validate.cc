#include "crux/protocol/validate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/text.h"
#include "crux/protocol/codec.h"

namespace crux::protocol {
namespace {

using core::Status;

constexpr uint64_t kMaxBytesPerIteration = uint64_t{1} << 50;  // 1 PiB.
constexpr double kMaxFlops = 1e24;
constexpr double kMaxBps = 1e15;  // 1 Pbps.
constexpr size_t kMaxShortText = 256;
constexpr uint32_t kMaxLevels = 64;
constexpr uint32_t kMaxSwitchQueues = 64;
constexpr size_t kMaxBackends = 16;
constexpr size_t kMaxPorts = 4096;

// A field path ("register_job.placement[3].host") rendered only when a check fails: each level
// is an object pointing at its parent (which must outlive it: a named local or a temporary of the
// same full-expression), so a message that passes allocates nothing for field names.
class Field {
 public:
  Field(const char* root) : name_(root) {}         // NOLINT(runtime/explicit)
  Field(std::string_view root) : name_(root) {}    // NOLINT(runtime/explicit)
  Field(const std::string& root) : name_(root) {}  // NOLINT(runtime/explicit)
  Field(const Field& parent, std::string_view name) : parent_(&parent), name_(name) {}
  Field(const Field& parent, size_t index) : parent_(&parent), index_(index), is_index_(true) {}

  std::string str() const {
    if (!parent_) return std::string(name_);
    std::string out = parent_->str();
    if (is_index_) {
      out += '[';
      out += std::to_string(index_);
      out += ']';
    } else {
      out += '.';
      out += name_;
    }
    return out;
  }

 private:
  const Field* parent_ = nullptr;
  std::string_view name_;
  size_t index_ = 0;
  bool is_index_ = false;
};

Status Bad(const Field& field, const std::string& what) {
  return core::InvalidArgumentError(field.str() + ": " + what);
}

// The one name rule (core::IsValidName); link names additionally allow '>' ("tor0->agg1").
bool IsValidName(std::string_view id, bool allow_gt) {
  if (id.empty() || id.size() > kMaxIdLength) return false;
  for (char c : id) {
    if (!core::IsNameChar(c) && !(allow_gt && c == '>')) return false;
  }
  return true;
}

// Quoted (and cut) for error messages; non-printable bytes become '?'.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const char c = s[i];
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 64) out += "...";
  out += '"';
  return out;
}

Status CheckId(std::string_view id, const Field& field) {
  if (id.empty()) return Bad(field, "missing");
  if (!IsValidName(id, false)) {
    return Bad(field, "invalid name " + Quote(id) + " (allowed: 1-" + std::to_string(kMaxIdLength) +
                          " chars of [A-Za-z0-9._:/-])");
  }
  return Status::Ok();
}

Status CheckOptionalId(std::string_view id, const Field& field) {
  if (id.empty()) return Status::Ok();
  return CheckId(id, field);
}

using core::FirstUnprintable;

Status CheckText(std::string_view text, size_t max, const Field& field) {
  if (text.size() > max) {
    return Bad(field, "too long (" + std::to_string(text.size()) + " bytes, at most " +
                          std::to_string(max) + ")");
  }
  if (size_t at = FirstUnprintable(text); at != std::string_view::npos) {
    return Bad(field, "not printable text: byte " + std::to_string(at) +
                          " starts a control character, a bidirectional override or invalid "
                          "UTF-8 (text fields must be printable UTF-8)");
  }
  return Status::Ok();
}

Status CheckCount(size_t n, size_t max, const Field& field) {
  if (n > max) {
    return Bad(field,
               "too many entries (" + std::to_string(n) + ", at most " + std::to_string(max) + ")");
  }
  return Status::Ok();
}

Status CheckFinite(double v, const Field& field) {
  if (!std::isfinite(v)) return Bad(field, "must be finite (got " + std::to_string(v) + ")");
  return Status::Ok();
}

Status CheckFiniteNonNegative(double v, const Field& field) {
  CRUX_RETURN_IF_ERROR(CheckFinite(v, field));
  if (v < 0) return Bad(field, "must be >= 0 (got " + std::to_string(v) + ")");
  return Status::Ok();
}

Status CheckMaxU64(uint64_t v, uint64_t max, const Field& field) {
  if (v > max) {
    return Bad(field,
               "too large (got " + std::to_string(v) + ", at most " + std::to_string(max) + ")");
  }
  return Status::Ok();
}

Status CheckDscp(uint32_t v, const Field& field) {
  if (v > 63) return Bad(field, "must be a DSCP value 0-63 (got " + std::to_string(v) + ")");
  return Status::Ok();
}

Status CheckTc(uint32_t v, const Field& field) {
  if (v > 7) return Bad(field, "must be a traffic class 0-7 (got " + std::to_string(v) + ")");
  return Status::Ok();
}

Status CheckEnforcement(const v1::EnforcementCheck& e, const Field& f) {
  if (!v1::EnforcementStatus_IsValid(e.status())) {
    return Bad(Field(f, "status"), "unknown status " + std::to_string(e.status()));
  }
  return CheckText(e.detail(), kMaxTextLength, Field(f, "detail"));
}

Status CheckPeerBytes(const v1::PeerBytes& p, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckId(p.local_nic(), Field(f, "local_nic")));
  CRUX_RETURN_IF_ERROR(CheckId(p.remote_nic(), Field(f, "remote_nic")));
  return CheckMaxU64(p.bytes(), kMaxBytesPerIteration, Field(f, "bytes"));
}

Status CheckJobSummary(const v1::JobSummary& s, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckId(s.job_id(), Field(f, "job_id")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.intensity(), Field(f, "intensity")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.k(), Field(f, "k")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.priority(), Field(f, "priority")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.period_ms(), Field(f, "period_ms")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.predicted_ms(), Field(f, "predicted_ms")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.ecmp_ms(), Field(f, "ecmp_ms")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(s.observed_ms(), Field(f, "observed_ms")));
  CRUX_RETURN_IF_ERROR(CheckFinite(s.gain(), Field(f, "gain")));
  return CheckDscp(s.dscp(), Field(f, "dscp"));
}

Status ValidateImpactRequest(const v1::ImpactRequest& r) {
  if (r.top() > 1000) return Bad("impact_request.top", "too large (at most 1000)");
  return CheckFiniteNonNegative(r.error_threshold(), "impact_request.error_threshold");
}

Status ValidateImpactReply(const v1::ImpactReply& r) {
  CRUX_RETURN_IF_ERROR(CheckText(r.error(), kMaxTextLength, "impact_reply.error"));
  CRUX_RETURN_IF_ERROR(CheckFinite(r.gpus_recovered(), "impact_reply.gpus_recovered"));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(r.error_p50(), "impact_reply.error_p50"));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(r.error_p90(), "impact_reply.error_p90"));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(r.error_threshold(), "impact_reply.error_threshold"));
  for (const auto* list : {&r.gainers(), &r.losers(), &r.mispredicted()}) {
    for (int i = 0; i < list->size(); ++i) {
      CRUX_RETURN_IF_ERROR(
          CheckJobSummary(list->Get(i), Field("impact_reply.jobs", static_cast<size_t>(i))));
    }
  }
  return Status::Ok();
}

Status CheckLinkInfo(const v1::LinkInfo& l, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(l.capacity_bps(), Field(f, "capacity_bps")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(l.nominal_bps(), Field(f, "nominal_bps")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(l.load_bps(), Field(f, "load_bps")));
  return CheckFiniteNonNegative(l.utilization(), Field(f, "utilization"));
}

Status CheckFaultEvent(const v1::FaultEvent& e, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(e.capacity_bps(), Field(f, "capacity_bps")));
  return CheckText(e.reason(), kMaxTextLength, Field(f, "reason"));
}

Status CheckJobDetail(const v1::JobDetail& d, const Field& f) {
  if (d.has_summary()) CRUX_RETURN_IF_ERROR(CheckJobSummary(d.summary(), Field(f, "summary")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(d.work_flops(), Field(f, "work_flops")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(d.comm_time_ms(), Field(f, "comm_time_ms")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(d.pair_gain(), Field(f, "pair_gain")));
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(d.pair_loss(), Field(f, "pair_loss")));
  CRUX_RETURN_IF_ERROR(CheckOptionalId(d.reference_job(), Field(f, "reference_job")));
  for (int i = 0; i < d.contends_with_size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        CheckFinite(d.contends_with(i).weight(),
                    Field(Field(Field(f, "contends_with"), static_cast<size_t>(i)), "weight")));
  }
  for (int i = 0; i < d.faults_size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        CheckFaultEvent(d.faults(i), Field(Field(f, "faults"), static_cast<size_t>(i))));
  }
  return Status::Ok();
}

// One FlowStats of a heartbeat (issue #14).
Status CheckFlowStats(const v1::FlowStats& s, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckId(s.src_nic(), Field(f, "src_nic")));
  CRUX_RETURN_IF_ERROR(CheckId(s.dst_nic(), Field(f, "dst_nic")));
  if (s.udp_sport() > 65535) {
    return Bad(Field(f, "udp_sport"),
               "must be 0-65535 (got " + std::to_string(s.udp_sport()) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckMaxU64(s.bytes(), kMaxBytesPerIteration, Field(f, "bytes")));
  if (s.window_ns() == 0 || s.window_ns() > kMaxIterationNs) {
    return Bad(Field(f, "window_ns"),
               "must be > 0 and at most one day (got " + std::to_string(s.window_ns()) + ")");
  }
  if (s.transfer_time_ns() > s.window_ns()) {
    return Bad(Field(f, "transfer_time_ns"), "must be <= window_ns");
  }
  if (s.bytes() > 0 && s.transfer_time_ns() == 0) {
    return Bad(Field(f, "transfer_time_ns"), "must be > 0 when bytes > 0");
  }
  return Status::Ok();
}

// One host probe result of a HostTelemetry (issue #27): a datagram train's measurement.
Status CheckHostProbe(const v1::HostProbeResult& p, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckId(p.job_id(), Field(f, "job_id")));
  CRUX_RETURN_IF_ERROR(CheckId(p.src_nic(), Field(f, "src_nic")));
  CRUX_RETURN_IF_ERROR(CheckId(p.dst_nic(), Field(f, "dst_nic")));
  if (p.src_nic() == p.dst_nic()) {
    return Bad(Field(f, "dst_nic"), "must differ from src_nic (got " + Quote(p.dst_nic()) + ")");
  }
  if (p.udp_sport() == 0 || p.udp_sport() > 65535) {
    return Bad(Field(f, "udp_sport"), "must be 1-65535, the probe's pinned port (got " +
                                          std::to_string(p.udp_sport()) + ")");
  }
  if (p.sent() > kMaxProbeTrainDatagrams) {
    return Bad(Field(f, "sent"), "must be at most " + std::to_string(kMaxProbeTrainDatagrams) +
                                     " (got " + std::to_string(p.sent()) + ")");
  }
  if (p.received() > p.sent()) {
    return Bad(Field(f, "received"), "must be <= sent (got " + std::to_string(p.received()) +
                                         " of " + std::to_string(p.sent()) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckMaxU64(p.bytes(), kMaxProbeTrainBytes, Field(f, "bytes")));
  CRUX_RETURN_IF_ERROR(
      CheckMaxU64(p.transfer_time_ns(), kMaxProbeTrainNs, Field(f, "transfer_time_ns")));
  CRUX_RETURN_IF_ERROR(CheckMaxU64(p.send_time_ns(), kMaxProbeTrainNs, Field(f, "send_time_ns")));
  if (p.lost() && (p.bytes() > 0 || p.received() > 0)) {
    return Bad(Field(f, "lost"), "a lost train has no bytes and nothing received");
  }
  if (p.bytes() > 0 && p.transfer_time_ns() == 0) {
    return Bad(Field(f, "transfer_time_ns"), "must be > 0 when bytes > 0");
  }
  if (!p.lost() && p.bytes() == 0) {
    return Bad(Field(f, "bytes"), "must be > 0 unless the train was lost");
  }
  return Status::Ok();
}

Status CheckPortCounters(const v1::PortCounters& c, const Field& f) {
  if (c.interval_ns() == 0 || c.interval_ns() > kMaxIterationNs) {
    return Bad(Field(f, "interval_ns"),
               "must be > 0 and at most one day (got " + std::to_string(c.interval_ns()) + ")");
  }
  return Status::Ok();
}

}  // namespace

bool IsValidId(std::string_view id) { return IsValidName(id, false); }

core::Status ValidateSwitchTelemetry(const v1::SwitchTelemetry& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.switch_name(), Field(f, "switch_name")));
  CRUX_RETURN_IF_ERROR(CheckCount(m.ports_size(), kMaxPorts, Field(f, "ports")));
  for (int i = 0; i < m.ports_size(); ++i) {
    const v1::PortStatus& p = m.ports(i);
    const Field ports(f, "ports");
    const Field pf(ports, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(p.port(), Field(pf, "port")));
    CRUX_RETURN_IF_ERROR(CheckOptionalId(p.neighbor(), Field(pf, "neighbor")));
    if (!v1::PortOperStatus_IsValid(p.oper_status())) {
      return Bad(Field(pf, "oper_status"), "unknown value " + std::to_string(p.oper_status()));
    }
    if (p.has_counters())
      CRUX_RETURN_IF_ERROR(CheckPortCounters(p.counters(), Field(pf, "counters")));
  }
  return Status::Ok();
}

core::Status ValidateHostTelemetry(const v1::HostTelemetry& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.host(), Field(f, "host")));
  CRUX_RETURN_IF_ERROR(CheckCount(m.nics_size(), kMaxNicsPerHost, Field(f, "nics")));
  const Field nics(f, "nics");
  for (int i = 0; i < m.nics_size(); ++i) {
    const v1::NicCounters& n = m.nics(i);
    const Field nf(nics, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(n.nic(), Field(nf, "nic")));
    for (int k = 0; k < i; ++k) {
      if (m.nics(k).nic() == n.nic()) {
        return Bad(Field(nf, "nic"), "duplicate NIC " + Quote(n.nic()));
      }
    }
    CRUX_RETURN_IF_ERROR(CheckOptionalId(n.device(), Field(nf, "device")));
    if (n.port() > 255) {
      return Bad(Field(nf, "port"), "must be 0-255 (got " + std::to_string(n.port()) + ")");
    }
    if (n.interval_ns() == 0 || n.interval_ns() > kMaxIterationNs) {
      return Bad(Field(nf, "interval_ns"),
                 "must be > 0 and at most one day (got " + std::to_string(n.interval_ns()) + ")");
    }
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.probes_size(), kMaxHostProbes, Field(f, "probes")));
  const Field probes(f, "probes");
  for (int i = 0; i < m.probes_size(); ++i) {
    CRUX_RETURN_IF_ERROR(CheckHostProbe(m.probes(i), Field(probes, static_cast<size_t>(i))));
  }
  return Status::Ok();
}

core::Status ValidateError(const v1::Error& m, std::string_view field) {
  const Field f(field);
  if (m.code() == v1::ERROR_CODE_UNSPECIFIED || !v1::ErrorCode_IsValid(m.code())) {
    return Bad(Field(f, "code"),
               "must be a known error code (got " + std::to_string(m.code()) + ")");
  }
  return CheckText(m.message(), kMaxTextLength, Field(f, "message"));
}

// crux-hostd's host part (client.proto HostPart), when present.
Status CheckHostPart(const v1::HostPart& h, const Field& f) {
  CRUX_RETURN_IF_ERROR(CheckId(h.host(), Field(f, "host")));
  if (h.hosts_expected() > kMaxPlacementHosts) {
    return Bad(Field(f, "hosts_expected"), "must be at most " + std::to_string(kMaxPlacementHosts));
  }
  if (h.local_ranks() > kMaxGpusPerHost) {
    return Bad(Field(f, "local_ranks"), "must be at most " + std::to_string(kMaxGpusPerHost));
  }
  return Status::Ok();
}

Status CheckCommTraffic(const v1::CommTraffic& c, const Field& f) {
  constexpr uint32_t kMaxRanks = 1u << 24;
  if (c.nranks() < 1 || c.nranks() > kMaxRanks) {
    return Bad(Field(f, "nranks"), "must be 1-" + std::to_string(kMaxRanks));
  }
  CRUX_RETURN_IF_ERROR(CheckCount(c.local_ranks_size(), kMaxGpusPerHost, Field(f, "local_ranks")));
  for (int i = 0; i < c.local_ranks_size(); ++i) {
    if (c.local_ranks(i) >= c.nranks()) {
      return Bad(Field(Field(f, "local_ranks"), static_cast<size_t>(i)), "must be < nranks");
    }
  }
  if (c.local_slots_size() != 0 && c.local_slots_size() != c.local_ranks_size()) {
    return Bad(Field(f, "local_slots"), "must be empty or as many as local_ranks");
  }
  for (int i = 0; i < c.local_slots_size(); ++i) {
    if (c.local_slots(i) >= kMaxGpusPerHost) {
      return Bad(Field(Field(f, "local_slots"), static_cast<size_t>(i)),
                 "must be < " + std::to_string(kMaxGpusPerHost));
    }
  }
  const Field bytes_field(f, "bytes");
  CRUX_RETURN_IF_ERROR(CheckCount(c.bytes_size(), kMaxPeers, bytes_field));
  for (int i = 0; i < c.bytes_size(); ++i) {
    const v1::RankPeerBytes& b = c.bytes(i);
    const Field bf(bytes_field, static_cast<size_t>(i));
    if (b.rank() >= c.nranks()) return Bad(Field(bf, "rank"), "must be < nranks");
    if (b.peer_rank() < -1 || b.peer_rank() >= static_cast<int64_t>(c.nranks())) {
      return Bad(Field(bf, "peer_rank"), "must be -1 or < nranks");
    }
    CRUX_RETURN_IF_ERROR(CheckMaxU64(b.bytes(), kMaxBytesPerIteration, Field(bf, "bytes")));
  }
  return Status::Ok();
}

core::Status ValidateRegisterJob(const v1::RegisterJob& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.job_id(), Field(f, "job_id")));
  CRUX_RETURN_IF_ERROR(CheckOptionalId(m.tenant(), Field(f, "tenant")));
  const Field pf(f, "placement");
  if (m.placement_size() == 0) return Bad(pf, "must list at least one host");
  CRUX_RETURN_IF_ERROR(CheckCount(m.placement_size(), kMaxPlacementHosts, pf));
  std::set<std::string_view> hosts;
  for (int i = 0; i < m.placement_size(); ++i) {
    const v1::HostPlacement& h = m.placement(i);
    const Field hf(pf, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(h.host(), Field(hf, "host")));
    if (!hosts.insert(h.host()).second) {
      return Bad(Field(hf, "host"), "duplicate host " + Quote(h.host()));
    }
    if (h.gpus() < 1 || h.gpus() > kMaxGpusPerHost) {
      return Bad(Field(hf, "gpus"), "must be 1-" + std::to_string(kMaxGpusPerHost) + " (got " +
                                        std::to_string(h.gpus()) + ")");
    }
    CRUX_RETURN_IF_ERROR(CheckCount(h.nics_size(), kMaxNicsPerHost, Field(hf, "nics")));
    for (int j = 0; j < h.nics_size(); ++j) {
      const Field nics(hf, "nics");
      const Field nf(nics, static_cast<size_t>(j));
      CRUX_RETURN_IF_ERROR(CheckId(h.nics(j).name(), Field(nf, "name")));
      CRUX_RETURN_IF_ERROR(CheckText(h.nics(j).address(), kMaxShortText, Field(nf, "address")));
    }
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.qps_size(), kMaxQueuePairs, Field(f, "qps")));
  for (int i = 0; i < m.qps_size(); ++i) {
    if (IsValidName(m.qps(i).local_nic(), false) && IsValidName(m.qps(i).remote_nic(), false)) {
      continue;
    }
    const Field qps(f, "qps");
    const Field qf(qps, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(m.qps(i).local_nic(), Field(qf, "local_nic")));
    CRUX_RETURN_IF_ERROR(CheckId(m.qps(i).remote_nic(), Field(qf, "remote_nic")));
  }
  const std::string& p = m.pattern();
  if (!p.empty() && p != "ring_allreduce" && p != "all_to_all" && p != "pipeline") {
    return Bad(Field(f, "pattern"),
               "unknown pattern " + Quote(p) + " (allowed: ring_allreduce, all_to_all, pipeline)");
  }
  CRUX_RETURN_IF_ERROR(
      CheckMaxU64(m.bytes_per_iteration(), kMaxBytesPerIteration, Field(f, "bytes_per_iteration")));
  if (m.lease_ms() != 0 && (m.lease_ms() < kMinLeaseMs || m.lease_ms() > kMaxLeaseMs)) {
    return Bad(Field(f, "lease_ms"), "must be 0 (default) or " + std::to_string(kMinLeaseMs) + "-" +
                                         std::to_string(kMaxLeaseMs) + " (got " +
                                         std::to_string(m.lease_ms()) + ")");
  }
  if (m.has_host_part()) {
    CRUX_RETURN_IF_ERROR(CheckHostPart(m.host_part(), Field(f, "host_part")));
    if (m.placement_size() != 1 || m.placement(0).host() != m.host_part().host()) {
      return Bad(Field(f, "host_part.host"), "a host part's placement must be that one host");
    }
  }
  return CheckText(m.model(), kMaxShortText, Field(f, "model"));
}

core::Status ValidateRegisterJobReply(const v1::RegisterJobReply& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.job_id(), Field(f, "job_id")));
  return CheckDscp(m.dscp(), Field(f, "dscp"));
}

core::Status ValidateProfileReport(const v1::ProfileReport& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.job_id(), Field(f, "job_id")));
  if (m.compute_time_ns() == 0) return Bad(Field(f, "compute_time_ns"), "must be > 0");
  CRUX_RETURN_IF_ERROR(
      CheckMaxU64(m.compute_time_ns(), kMaxIterationNs, Field(f, "compute_time_ns")));
  CRUX_RETURN_IF_ERROR(
      CheckFiniteNonNegative(m.flops_per_iteration(), Field(f, "flops_per_iteration")));
  if (m.flops_per_iteration() > kMaxFlops) {
    return Bad(Field(f, "flops_per_iteration"), "too large (at most 1e24)");
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.peers_size(), kMaxPeers, Field(f, "peers")));
  for (int i = 0; i < m.peers_size(); ++i) {
    // Fast path without building field paths; the slow path names the bad field.
    const v1::PeerBytes& pb = m.peers(i);
    if (IsValidName(pb.local_nic(), false) && IsValidName(pb.remote_nic(), false) &&
        pb.bytes() <= kMaxBytesPerIteration) {
      continue;
    }
    CRUX_RETURN_IF_ERROR(CheckPeerBytes(pb, Field(Field(f, "peers"), static_cast<size_t>(i))));
  }
  if (m.iteration_period_ns() == 0) return Bad(Field(f, "iteration_period_ns"), "must be > 0");
  CRUX_RETURN_IF_ERROR(
      CheckMaxU64(m.iteration_period_ns(), kMaxIterationNs, Field(f, "iteration_period_ns")));
  CRUX_RETURN_IF_ERROR(CheckFinite(m.overlap_start(), Field(f, "overlap_start")));
  if (m.overlap_start() < 0 || m.overlap_start() > 1) {
    return Bad(Field(f, "overlap_start"),
               "must be in [0, 1] (got " + std::to_string(m.overlap_start()) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckFinite(m.compression_ratio(), Field(f, "compression_ratio")));
  if (m.compression_ratio() < 0 || m.compression_ratio() > kMaxCompressionRatio) {
    return Bad(Field(f, "compression_ratio"), "must be in (0, 1000] or 0 for 1 (got " +
                                                  std::to_string(m.compression_ratio()) + ")");
  }
  if (m.samples() < 1) return Bad(Field(f, "samples"), "must be >= 1");
  if (m.has_host_part()) CRUX_RETURN_IF_ERROR(CheckHostPart(m.host_part(), Field(f, "host_part")));
  CRUX_RETURN_IF_ERROR(CheckCount(m.comms_size(), kMaxPeers, Field(f, "comms")));
  for (int i = 0; i < m.comms_size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        CheckCommTraffic(m.comms(i), Field(Field(f, "comms"), static_cast<size_t>(i))));
  }
  return CheckMaxU64(m.bytes_per_iteration(), kMaxBytesPerIteration,
                     Field(f, "bytes_per_iteration"));
}

core::Status ValidateHeartbeat(const v1::Heartbeat& m, std::string_view field) {
  if (m.has_host_part()) {
    CRUX_RETURN_IF_ERROR(CheckHostPart(m.host_part(), Field(Field(field), "host_part")));
  }
  const Field root(field);  // Named: `flows` points at it (a temporary would die here).
  const Field flows(root, "flows");
  CRUX_RETURN_IF_ERROR(CheckCount(m.flows_size(), kMaxFlows, flows));
  for (int i = 0; i < m.flows_size(); ++i) {
    CRUX_RETURN_IF_ERROR(CheckFlowStats(m.flows(i), Field(flows, static_cast<size_t>(i))));
  }
  return CheckId(m.job_id(), Field(field, "job_id"));
}

core::Status ValidateEndJob(const v1::EndJob& m, std::string_view field) {
  CRUX_RETURN_IF_ERROR(CheckId(m.job_id(), Field(field, "job_id")));
  if (m.has_host_part()) {
    CRUX_RETURN_IF_ERROR(CheckHostPart(m.host_part(), Field(Field(field), "host_part")));
  }
  return CheckText(m.reason(), kMaxTextLength, Field(field, "reason"));
}

core::Status ValidateAssignment(const v1::Assignment& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.job_id(), Field(f, "job_id")));
  if (m.level() >= kMaxLevels) {
    return Bad(Field(f, "level"), "must be < " + std::to_string(kMaxLevels) + " (got " +
                                      std::to_string(m.level()) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckDscp(m.dscp(), Field(f, "dscp")));
  if (m.traffic_class() > 255 || (m.traffic_class() >> 2) != m.dscp()) {
    return Bad(Field(f, "traffic_class"), "must be dscp << 2 (got " +
                                              std::to_string(m.traffic_class()) + " for dscp " +
                                              std::to_string(m.dscp()) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.flows_size(), kMaxFlows, Field(f, "flows")));
  for (int i = 0; i < m.flows_size(); ++i) {
    const v1::FlowAssignment& fl = m.flows(i);
    if (IsValidName(fl.src_nic(), false) && IsValidName(fl.dst_nic(), false) &&
        fl.udp_sport() <= 65535 && static_cast<size_t>(fl.path_size()) <= kMaxPathHops &&
        std::all_of(fl.path().begin(), fl.path().end(),
                    [](const std::string& hop) { return IsValidName(hop, false); })) {
      continue;
    }
    const Field flows(f, "flows");
    const Field ff(flows, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(fl.src_nic(), Field(ff, "src_nic")));
    CRUX_RETURN_IF_ERROR(CheckId(fl.dst_nic(), Field(ff, "dst_nic")));
    if (fl.udp_sport() > 65535) {
      return Bad(Field(ff, "udp_sport"),
                 "must be 0-65535 (got " + std::to_string(fl.udp_sport()) + ")");
    }
    CRUX_RETURN_IF_ERROR(CheckCount(fl.path_size(), kMaxPathHops, Field(ff, "path")));
    for (int j = 0; j < fl.path_size(); ++j) {
      CRUX_RETURN_IF_ERROR(CheckId(fl.path(j), Field(Field(ff, "path"), static_cast<size_t>(j))));
    }
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.probes_size(), kMaxFlows, Field(f, "probes")));
  for (int i = 0; i < m.probes_size(); ++i) {
    const v1::ProbeTarget& p = m.probes(i);
    const Field probes(f, "probes");
    const Field pf(probes, static_cast<size_t>(i));
    CRUX_RETURN_IF_ERROR(CheckId(p.src_nic(), Field(pf, "src_nic")));
    CRUX_RETURN_IF_ERROR(CheckId(p.dst_nic(), Field(pf, "dst_nic")));
    if (p.udp_sport() > 65535) {
      return Bad(Field(pf, "udp_sport"),
                 "must be 0-65535 (got " + std::to_string(p.udp_sport()) + ")");
    }
    CRUX_RETURN_IF_ERROR(CheckCount(p.path_size(), kMaxPathHops, Field(pf, "path")));
    for (int j = 0; j < p.path_size(); ++j) {
      CRUX_RETURN_IF_ERROR(CheckId(p.path(j), Field(Field(pf, "path"), static_cast<size_t>(j))));
    }
  }
  if (!v1::JobState_IsValid(m.state())) {
    return Bad(Field(f, "state"), "unknown job state " + std::to_string(m.state()));
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.nccl_env_size(), kMaxNcclEnv, Field(f, "nccl_env")));
  for (const auto& [k, v] : m.nccl_env()) {
    bool ok = !k.empty() && k.size() <= kMaxShortText;
    for (char c : k) ok = ok && ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok) {
      return Bad(Field(f, "nccl_env"),
                 "invalid variable name " + Quote(k) + " (allowed: [A-Z0-9_]+)");
    }
    CRUX_RETURN_IF_ERROR(CheckText(v, kMaxShortText, Field(f, "nccl_env").str() + "[" + k + "]"));
  }
  return Status::Ok();
}

core::Status ValidateAck(const v1::Ack& m, std::string_view field) {
  CRUX_RETURN_IF_ERROR(CheckOptionalId(m.job_id(), Field(field, "job_id")));
  return CheckText(m.error(), kMaxTextLength, Field(field, "error"));
}

core::Status ValidateAssignmentBatch(const v1::AssignmentBatch& m, std::string_view field) {
  const Field f(field);
  if (m.assignments_size() == 0) return Bad(Field(f, "assignments"), "must not be empty");
  CRUX_RETURN_IF_ERROR(
      CheckCount(m.assignments_size(), kMaxBatchAssignments, Field(f, "assignments")));
  std::vector<std::string_view> jobs;
  jobs.reserve(m.assignments_size());
  const Field list(f, "assignments");
  for (int i = 0; i < m.assignments_size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        ValidateAssignment(m.assignments(i), Field(list, static_cast<size_t>(i)).str()));
    jobs.push_back(m.assignments(i).job_id());
  }
  std::sort(jobs.begin(), jobs.end());
  if (auto dup = std::adjacent_find(jobs.begin(), jobs.end()); dup != jobs.end()) {
    return Bad(Field(f, "assignments"), "job " + Quote(*dup) + " appears more than once");
  }
  return Status::Ok();
}

core::Status ValidateAckBatch(const v1::AckBatch& m, std::string_view field) {
  const Field f(field);
  if (m.acks_size() == 0) return Bad(Field(f, "acks"), "must not be empty");
  CRUX_RETURN_IF_ERROR(CheckCount(m.acks_size(), kMaxBatchAssignments, Field(f, "acks")));
  const Field list(f, "acks");
  for (int i = 0; i < m.acks_size(); ++i) {
    CRUX_RETURN_IF_ERROR(ValidateAck(m.acks(i), Field(list, static_cast<size_t>(i)).str()));
  }
  return Status::Ok();
}

core::Status ValidateSwitchHello(const v1::SwitchHello& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.switch_name(), Field(f, "switch_name")));
  CRUX_RETURN_IF_ERROR(CheckText(m.agent_version(), kMaxShortText, Field(f, "agent_version")));
  if (m.has_capabilities()) {
    const Field cf(f, "capabilities");
    const v1::SwitchCapabilities& c = m.capabilities();
    if (c.queues() < 1 || c.queues() > kMaxSwitchQueues) {
      return Bad(Field(cf, "queues"), "must be 1-" + std::to_string(kMaxSwitchQueues) + " (got " +
                                          std::to_string(c.queues()) + ")");
    }
    CRUX_RETURN_IF_ERROR(CheckCount(c.backends_size(), kMaxBackends, Field(cf, "backends")));
    for (int i = 0; i < c.backends_size(); ++i) {
      CRUX_RETURN_IF_ERROR(
          CheckId(c.backends(i), Field(Field(cf, "backends"), static_cast<size_t>(i))));
    }
  }
  if (m.has_enforcement()) {
    CRUX_RETURN_IF_ERROR(CheckEnforcement(m.enforcement(), Field(f, "enforcement")));
  }
  return Status::Ok();
}

core::Status ValidateSwitchQosState(const v1::SwitchQosState& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.switch_name(), Field(f, "switch_name")));
  for (const auto& [dscp, tc] : m.dscp_to_tc()) {
    const std::string ef = Field(f, "dscp_to_tc").str() + "[" + std::to_string(dscp) + "]";
    CRUX_RETURN_IF_ERROR(CheckDscp(dscp, Field(f, "dscp_to_tc").str() + " key"));
    CRUX_RETURN_IF_ERROR(CheckTc(tc, ef));
  }
  for (const auto& [tc, queue] : m.tc_to_queue()) {
    const std::string ef = Field(f, "tc_to_queue").str() + "[" + std::to_string(tc) + "]";
    CRUX_RETURN_IF_ERROR(CheckTc(tc, Field(f, "tc_to_queue").str() + " key"));
    if (queue >= kMaxSwitchQueues) {
      return Bad(ef, "queue must be 0-" + std::to_string(kMaxSwitchQueues - 1) + " (got " +
                         std::to_string(queue) + ")");
    }
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.schedulers_size(), kMaxSwitchQueues, Field(f, "schedulers")));
  std::set<uint32_t> queues;
  for (int i = 0; i < m.schedulers_size(); ++i) {
    const v1::QueueScheduler& s = m.schedulers(i);
    const Field schedulers(f, "schedulers");
    const Field sf(schedulers, static_cast<size_t>(i));
    if (s.queue() >= kMaxSwitchQueues) {
      return Bad(Field(sf, "queue"), "must be 0-" + std::to_string(kMaxSwitchQueues - 1) +
                                         " (got " + std::to_string(s.queue()) + ")");
    }
    if (!queues.insert(s.queue()).second) {
      return Bad(Field(sf, "queue"), "duplicate queue " + std::to_string(s.queue()));
    }
    if (s.type() == "DWRR") {
      if (s.weight() < 1 || s.weight() > 100) {
        return Bad(Field(sf, "weight"),
                   "DWRR weight must be 1-100 (got " + std::to_string(s.weight()) + ")");
      }
    } else if (s.type() == "STRICT") {
      if (s.weight() > 100) {
        return Bad(Field(sf, "weight"), "must be 0-100 (got " + std::to_string(s.weight()) + ")");
      }
    } else {
      return Bad(Field(sf, "type"), "must be STRICT or DWRR (got " + Quote(s.type()) + ")");
    }
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.ports_size(), kMaxPorts, Field(f, "ports")));
  for (int i = 0; i < m.ports_size(); ++i) {
    CRUX_RETURN_IF_ERROR(CheckId(m.ports(i), Field(Field(f, "ports"), static_cast<size_t>(i))));
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.pfc_enable_size(), 8, Field(f, "pfc_enable")));
  for (int i = 0; i < m.pfc_enable_size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        CheckTc(m.pfc_enable(i), Field(Field(f, "pfc_enable"), static_cast<size_t>(i))));
  }
  CRUX_RETURN_IF_ERROR(CheckCount(m.job_tcs_size(), 8, Field(f, "job_tcs")));
  for (int i = 0; i < m.job_tcs_size(); ++i) {
    CRUX_RETURN_IF_ERROR(CheckTc(m.job_tcs(i), Field(Field(f, "job_tcs"), static_cast<size_t>(i))));
  }
  return Status::Ok();
}

core::Status ValidateSwitchApplied(const v1::SwitchApplied& m, std::string_view field) {
  const Field f(field);
  CRUX_RETURN_IF_ERROR(CheckId(m.switch_name(), Field(f, "switch_name")));
  CRUX_RETURN_IF_ERROR(CheckText(m.error(), kMaxTextLength, Field(f, "error")));
  if (m.has_state())
    CRUX_RETURN_IF_ERROR(ValidateSwitchQosState(m.state(), Field(f, "state").str()));
  if (m.has_enforcement()) {
    CRUX_RETURN_IF_ERROR(CheckEnforcement(m.enforcement(), Field(f, "enforcement")));
  }
  return Status::Ok();
}

core::Status ValidateJobRequest(const v1::JobRequest& m, std::string_view field) {
  return CheckId(m.job_id(), Field(field, "job_id"));
}

core::Status ValidateListLinksRequest(const v1::ListLinksRequest& /*m*/,
                                      std::string_view /*field*/) {
  return Status::Ok();
}

core::Status ValidateSetLinkRequest(const v1::SetLinkRequest& m, std::string_view field) {
  const Field f(field);
  if (m.link().empty()) return Bad(Field(f, "link"), "missing");
  if (!IsValidName(m.link(), /*allow_gt=*/true)) {
    return Bad(Field(f, "link"), "invalid link name " + Quote(m.link()) +
                                     " (expected \"a->b\" or \"a-b\" of node names)");
  }
  if (m.automatic()) {
    if (m.health() != v1::LINK_HEALTH_UNSPECIFIED || m.capacity_bps() != 0) {
      return Bad(Field(f, "automatic"),
                 "hands the link back: health and capacity_bps must be unset");
    }
    return Status::Ok();
  }
  if (m.health() == v1::LINK_HEALTH_UNSPECIFIED || !v1::LinkHealth_IsValid(m.health())) {
    return Bad(Field(f, "health"), "must be UP, DEGRADED or DOWN (or automatic)");
  }
  CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(m.capacity_bps(), Field(f, "capacity_bps")));
  if (m.capacity_bps() > kMaxBps) return Bad(Field(f, "capacity_bps"), "too large (at most 1e15)");
  if (m.health() == v1::LINK_HEALTH_DEGRADED && m.capacity_bps() <= 0) {
    return Bad(Field(f, "capacity_bps"), "must be > 0 for DEGRADED");
  }
  return Status::Ok();
}

namespace {

core::Status ValidateBody(const v1::Envelope& msg) {
  using E = v1::Envelope;
  switch (msg.body_case()) {
    case E::BODY_NOT_SET:
      return Bad("envelope.body", "missing");
    case E::kError:
      return ValidateError(msg.error());
    case E::kRegisterJob:
      return ValidateRegisterJob(msg.register_job());
    case E::kRegisterJobReply:
      return ValidateRegisterJobReply(msg.register_job_reply());
    case E::kProfileReport:
      return ValidateProfileReport(msg.profile_report());
    case E::kHeartbeat:
      return ValidateHeartbeat(msg.heartbeat());
    case E::kEndJob:
      return ValidateEndJob(msg.end_job());
    case E::kAssignment:
      return ValidateAssignment(msg.assignment());
    case E::kAck:
      return ValidateAck(msg.ack());
    case E::kAssignmentBatch:
      return ValidateAssignmentBatch(msg.assignment_batch());
    case E::kAckBatch:
      return ValidateAckBatch(msg.ack_batch());
    case E::kSwitchHello:
      return ValidateSwitchHello(msg.switch_hello());
    case E::kSwitchState:
      return ValidateSwitchQosState(msg.switch_state());
    case E::kSwitchApplied:
      return ValidateSwitchApplied(msg.switch_applied());
    case E::kSwitchTelemetry:
      return ValidateSwitchTelemetry(msg.switch_telemetry());
    case E::kHostTelemetry:
      return ValidateHostTelemetry(msg.host_telemetry());
    case E::kListFaultsRequest:
      return Status::Ok();
    case E::kListFaultsReply:
      for (int i = 0; i < msg.list_faults_reply().events_size(); ++i) {
        CRUX_RETURN_IF_ERROR(
            CheckFaultEvent(msg.list_faults_reply().events(i),
                            Field("list_faults_reply.events", static_cast<size_t>(i))));
      }
      for (const v1::FaultInfo& l : msg.list_faults_reply().links()) {
        CRUX_RETURN_IF_ERROR(CheckFiniteNonNegative(l.capacity_bps(), "list_faults_reply.links"));
        CRUX_RETURN_IF_ERROR(CheckFinite(l.score(), "list_faults_reply.links"));
      }
      return Status::Ok();
    case E::kStatusRequest:
    case E::kListJobsRequest:
    case E::kPlanDryRunRequest:
    case E::kListSwitchesRequest:
      return Status::Ok();
    case E::kJobRequest:
      return ValidateJobRequest(msg.job_request());
    case E::kListLinksRequest:
      return ValidateListLinksRequest(msg.list_links_request());
    case E::kSetLinkRequest:
      return ValidateSetLinkRequest(msg.set_link_request());
    case E::kStatusReply:
      return CheckFiniteNonNegative(msg.status_reply().last_replan_ms(),
                                    "status_reply.last_replan_ms");
    case E::kListJobsReply:
      for (int i = 0; i < msg.list_jobs_reply().jobs_size(); ++i) {
        CRUX_RETURN_IF_ERROR(CheckJobSummary(
            msg.list_jobs_reply().jobs(i), Field("list_jobs_reply.jobs", static_cast<size_t>(i))));
      }
      return Status::Ok();
    case E::kJobDetail:
      return CheckJobDetail(msg.job_detail(), "job_detail");
    case E::kListLinksReply:
      for (int i = 0; i < msg.list_links_reply().links_size(); ++i) {
        CRUX_RETURN_IF_ERROR(
            CheckLinkInfo(msg.list_links_reply().links(i),
                          Field("list_links_reply.links", static_cast<size_t>(i))));
      }
      return Status::Ok();
    case E::kSetLinkReply:
      for (int i = 0; i < msg.set_link_reply().changed_size(); ++i) {
        CRUX_RETURN_IF_ERROR(
            CheckLinkInfo(msg.set_link_reply().changed(i),
                          Field("set_link_reply.changed", static_cast<size_t>(i))));
      }
      return Status::Ok();
    case E::kPlanDryRunReply:
      return CheckFiniteNonNegative(msg.plan_dry_run_reply().replan_ms(),
                                    "plan_dry_run_reply.replan_ms");
    case E::kListSwitchesReply:
      return Status::Ok();
    case E::kImpactRequest:
      return ValidateImpactRequest(msg.impact_request());
    case E::kImpactReply:
      return ValidateImpactReply(msg.impact_reply());
  }
  return Bad("envelope.body", "unknown message type " + std::to_string(msg.body_case()));
}

// The requests a peer may send quiet (Envelope.quiet): those whose success reply is a plain Ack
// that tells the sender nothing it needs (periodic reports and telemetry).
bool MayBeQuiet(v1::Envelope::BodyCase body) {
  switch (body) {
    case v1::Envelope::kProfileReport:
    case v1::Envelope::kHeartbeat:
    case v1::Envelope::kHostTelemetry:
    case v1::Envelope::kSwitchTelemetry:
      return true;
    default:
      return false;
  }
}

}  // namespace

core::Status Validate(const v1::Envelope& msg) {
  if (msg.quiet() && !MayBeQuiet(msg.body_case())) {
    return Bad("envelope.quiet",
               "only profile_report, heartbeat, host_telemetry and switch_telemetry may be sent "
               "quiet, not " +
                   std::string(BodyName(msg)));
  }
  return ValidateBody(msg);
}

}  // namespace crux::protocol
