#include "crux/daemon/control/fault_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

namespace crux::daemon {
namespace {

std::string FormatGbps(double bps) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", bps * 1e-9);
  return buf;
}

std::string FormatPercentOf(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g%%", fraction * 100);
  return buf;
}

}  // namespace

std::vector<core::LinkId> FaultService::Apply(const std::vector<core::LinkDecision>& decisions) {
  std::vector<core::LinkId> changed;
  if (metrics_) {
    const core::FaultManager& fm = control_->loop().faults();
    const uint64_t total = fm.disbelieved_reports();
    metrics_->SetContradictedJobs(static_cast<int64_t>(fm.ContradictedJobs().size()),
                                  total >= disbelieved_seen_ ? total - disbelieved_seen_ : total);
    disbelieved_seen_ = total;
  }
  if (decisions.empty()) return changed;
  const core::Topology& nominal = topo_->nominal();
  const uint64_t epoch = control_->loop().epoch();
  std::vector<AuditRow> audit;
  for (const core::LinkDecision& d : decisions) {
    const double cap = nominal.link(d.link).capacity.ToBitsPerSec() * d.capacity_fraction;
    if (!topo_->SetEffective(d.link, d.health, cap)) continue;
    changed.push_back(d.link);
    if (d.automatic) ++automatic_changes_;
    if (metrics_) metrics_->AddLinkChange(d.automatic, std::string(core::LinkHealthName(d.health)));
    // Automatic changes are warnings (an operator should look); admin ones are info.
    if (d.automatic) {
      spdlog::warn("link {}", d.reason);
    } else {
      spdlog::info("link {}", d.reason);
    }
    AuditRow a;
    a.ts_ms = loop_->UnixMs();
    a.epoch = epoch;
    a.job_id = "link:" + topo_->Name(d.link);
    a.reason = std::string(d.automatic ? "automatic: " : "admin: ") + d.reason.substr(0, 3900);
    audit.push_back(std::move(a));
  }
  if (metrics_) {
    int64_t down = 0;
    int64_t degraded = 0;
    for (const LinkOverride& o : topo_->Overrides(0)) {
      (o.health == StoredHealth(core::LinkHealth::kDown) ? down : degraded) += 1;
    }
    metrics_->SetLinksNotUp(down, degraded);
  }
  if (!audit.empty()) {
    auto rows = std::make_shared<const std::vector<AuditRow>>(std::move(audit));
    writer_->Submit(
        [rows, epoch](Store& store) { return store.ApplyPlan(epoch, {}, {}, *rows); },
        [this](core::Status s) { (void)store_health_->Stored(std::move(s), "link_audit"); });
  }
  return changed;
}

double FaultService::MinCapacityFraction() const {
  return control_->loop().faults().options().min_capacity_fraction;
}

core::Result<std::vector<core::LinkId>> FaultService::SetAdmin(const std::string& name,
                                                               core::LinkHealth health,
                                                               double capacity_bps) {
  CRUX_ASSIGN_OR_RETURN(std::vector<core::LinkId> ids, topo_->Resolve(name));
  const core::Topology& nominal = topo_->nominal();
  if (health == core::LinkHealth::kDegraded) {
    // The same floor as the automatic path's estimates (FaultOptions::min_capacity_fraction): a
    // capacity of 1e-9 Gb/s is a typo, and would make every planned load an absurd utilisation.
    const double floor = MinCapacityFraction();
    for (core::LinkId id : ids) {
      const double cap = nominal.link(id).capacity.ToBitsPerSec();
      if (!std::isfinite(capacity_bps) || capacity_bps < floor * cap || capacity_bps < 1 ||
          capacity_bps > cap) {
        return core::InvalidArgumentError("set_link_request.capacity_bps: DEGRADED needs " +
                                          FormatGbps(floor * cap) + " Gb/s (" +
                                          FormatPercentOf(floor) +
                                          " of nominal, faults.min_capacity_fraction) <= "
                                          "capacity <= nominal " +
                                          FormatGbps(cap) + " Gb/s of " + topo_->Name(id) +
                                          "; got " + FormatGbps(capacity_bps) + " Gb/s");
      }
    }
  }
  for (core::LinkId id : ids) {
    core::AdminLinkState st;
    st.health = health;
    if (health == core::LinkHealth::kDegraded) {
      st.capacity_fraction = capacity_bps / nominal.link(id).capacity.ToBitsPerSec();
    }
    control_->SetLinkAdmin(id, st);
    const LinkOverride row{topo_->Name(id), StoredHealth(health),
                           health == core::LinkHealth::kDegraded ? capacity_bps : 0,
                           loop_->UnixMs()};
    writer_->Submit(
        [row](Store& store) { return store.PutLinkOverride(row); },
        [this](core::Status s) { (void)store_health_->Stored(std::move(s), "link_override"); });
  }
  return Apply(control_->EvaluateFaults());
}

core::Result<std::vector<core::LinkId>> FaultService::HandBack(const std::string& name) {
  CRUX_ASSIGN_OR_RETURN(std::vector<core::LinkId> ids, topo_->Resolve(name));
  for (core::LinkId id : ids) {
    control_->ClearLinkAdmin(id);
    const std::string link = topo_->Name(id);
    writer_->Submit(
        [link](Store& store) { return store.DeleteLinkOverride(link); },
        [this](core::Status s) { (void)store_health_->Stored(std::move(s), "link_override"); });
  }
  return Apply(control_->EvaluateFaults());
}

LinkOverride FaultService::Floored(LinkOverride o) const {
  core::Result<std::vector<core::LinkId>> ids = topo_->Resolve(o.link);
  core::Result<core::LinkHealth> health = HealthFromStored(o.health);
  if (!ids.ok() || !health.ok() || *health != core::LinkHealth::kDegraded) return o;
  for (core::LinkId id : *ids) {
    const double floor = MinCapacityFraction() * topo_->nominal().link(id).capacity.ToBitsPerSec();
    if (o.capacity_bps < floor) {
      spdlog::warn(
          "stored admin pin of link {}: capacity {} Gb/s is below the floor ({} of "
          "nominal, faults.min_capacity_fraction); using {} Gb/s",
          o.link, FormatGbps(o.capacity_bps), FormatPercentOf(MinCapacityFraction()),
          FormatGbps(floor));
      o.capacity_bps = floor;
    }
  }
  return o;
}

void FaultService::RestoreAdmin(const LinkOverride& o) {
  core::Result<std::vector<core::LinkId>> ids = topo_->Resolve(o.link);
  core::Result<core::LinkHealth> health = HealthFromStored(o.health);
  if (!ids.ok() || !health.ok()) return;  // TopologyManager::Restore logged it.
  for (core::LinkId id : *ids) {
    core::AdminLinkState st;
    st.health = *health;
    if (*health == core::LinkHealth::kDegraded) {
      st.capacity_fraction = o.capacity_bps / topo_->nominal().link(id).capacity.ToBitsPerSec();
    }
    control_->RestoreLinkAdmin(id, st);
  }
}

}  // namespace crux::daemon
