#include "crux/daemon/control/fault_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "crux/daemon/control/context.h"

namespace crux::daemon {

FaultService::FaultService(DaemonContext* ctx) : ctx_(ctx) {}
FaultService::~FaultService() = default;

void FaultService::Kick() {
  const std::optional<core::Duration> due = ctx_->plans->loop().faults_due();
  if (!due) return;
  if (armed_ && armed_for_ <= *due) return;  // The armed timer fires first and re-checks.
  armed_ = true;
  armed_for_ = *due;
  const uint64_t generation = ++generation_;
  const core::Duration wait = std::max(core::Duration::Zero(), *due - ctx_->loop->Now());
  std::weak_ptr<int> alive = alive_;
  ctx_->loop->RunAfter(wait, [this, alive, generation] {
    if (alive.expired()) return;  // The service is gone.
    Fire(generation);
  });
}

void FaultService::Fire(uint64_t generation) {
  if (generation != generation_) return;  // Replaced by a newer timer.
  armed_ = false;
  EvaluateNow();
  Kick();
}

void FaultService::EvaluateNow() {
  const std::optional<core::Duration> due = ctx_->plans->loop().faults_due();
  if (!due || *due > ctx_->loop->Now()) return;
  Apply(ctx_->plans->loop().EvaluateFaults());
}

std::vector<core::LinkId> FaultService::Apply(const std::vector<core::LinkDecision>& decisions) {
  std::vector<core::LinkId> changed;
  if (decisions.empty()) return changed;
  const core::Topology& nominal = ctx_->topo.nominal();
  std::vector<AuditRow> audit;
  for (const core::LinkDecision& d : decisions) {
    const double cap = nominal.link(d.link).capacity.ToBitsPerSec() * d.capacity_fraction;
    if (!ctx_->topo.SetEffective(d.link, d.health, cap)) continue;
    changed.push_back(d.link);
    if (d.automatic) ++automatic_changes_;
    if (ctx_->metrics) {
      ctx_->metrics->AddLinkChange(d.automatic, std::string(core::LinkHealthName(d.health)));
    }
    // Automatic changes are warnings (an operator should look); admin ones are info.
    if (d.automatic) {
      spdlog::warn("link {}", d.reason);
    } else {
      spdlog::info("link {}", d.reason);
    }
    AuditRow a;
    a.ts_ms = ctx_->loop->UnixMs();
    a.epoch = ctx_->plans->loop().epoch();
    a.job_id = "link:" + ctx_->topo.Name(d.link);
    a.reason = std::string(d.automatic ? "automatic: " : "admin: ") + d.reason.substr(0, 3900);
    audit.push_back(std::move(a));
  }
  if (ctx_->metrics) {
    int64_t down = 0;
    int64_t degraded = 0;
    for (const LinkOverride& o : ctx_->topo.Overrides(0)) {
      (o.health == StoredHealth(core::LinkHealth::kDown) ? down : degraded) += 1;
    }
    ctx_->metrics->SetLinksNotUp(down, degraded);
  }
  if (!audit.empty()) {
    auto rows = std::make_shared<const std::vector<AuditRow>>(std::move(audit));
    const uint64_t epoch = ctx_->plans->loop().epoch();
    ctx_->writer->Submit(
        [rows, epoch](Store& store) { return store.ApplyPlan(epoch, {}, {}, *rows); },
        [this](core::Status s) { (void)ctx_->store_health.Stored(std::move(s), "link_audit"); });
  }
  if (!changed.empty()) ctx_->plans->Kick();
  return changed;
}

core::Result<std::vector<core::LinkId>> FaultService::SetAdmin(const std::string& name,
                                                               core::LinkHealth health,
                                                               double capacity_bps) {
  CRUX_ASSIGN_OR_RETURN(std::vector<core::LinkId> ids, ctx_->topo.Resolve(name));
  const core::Topology& nominal = ctx_->topo.nominal();
  if (health == core::LinkHealth::kDegraded) {
    for (core::LinkId id : ids) {
      const double cap = nominal.link(id).capacity.ToBitsPerSec();
      if (!std::isfinite(capacity_bps) || capacity_bps < 1 || capacity_bps > cap) {
        return core::InvalidArgumentError(
            "set_link_request.capacity_bps: DEGRADED needs 0 < capacity_bps <= nominal (" +
            std::to_string(cap) + ")");
      }
    }
  }
  core::ControlLoop& loop = ctx_->plans->loop();
  for (core::LinkId id : ids) {
    core::AdminLinkState st;
    st.health = health;
    if (health == core::LinkHealth::kDegraded) {
      st.capacity_fraction = capacity_bps / nominal.link(id).capacity.ToBitsPerSec();
    }
    loop.SetLinkAdmin(id, st);
    const LinkOverride row{ctx_->topo.Name(id), StoredHealth(health),
                           health == core::LinkHealth::kDegraded ? capacity_bps : 0,
                           ctx_->loop->UnixMs()};
    ctx_->writer->Submit(
        [row](Store& store) { return store.PutLinkOverride(row); },
        [this](core::Status s) { (void)ctx_->store_health.Stored(std::move(s), "link_override"); });
  }
  std::vector<core::LinkId> changed = Apply(loop.EvaluateFaults());
  Kick();
  return changed;
}

core::Result<std::vector<core::LinkId>> FaultService::HandBack(const std::string& name) {
  CRUX_ASSIGN_OR_RETURN(std::vector<core::LinkId> ids, ctx_->topo.Resolve(name));
  core::ControlLoop& loop = ctx_->plans->loop();
  for (core::LinkId id : ids) {
    loop.ClearLinkAdmin(id);
    const std::string link = ctx_->topo.Name(id);
    ctx_->writer->Submit(
        [link](Store& store) { return store.DeleteLinkOverride(link); },
        [this](core::Status s) { (void)ctx_->store_health.Stored(std::move(s), "link_override"); });
  }
  std::vector<core::LinkId> changed = Apply(loop.EvaluateFaults());
  Kick();
  return changed;
}

void FaultService::RestoreAdmin(const LinkOverride& o) {
  core::Result<std::vector<core::LinkId>> ids = ctx_->topo.Resolve(o.link);
  core::Result<core::LinkHealth> health = HealthFromStored(o.health);
  if (!ids.ok() || !health.ok()) return;  // TopologyManager::Restore logged it.
  for (core::LinkId id : *ids) {
    core::AdminLinkState st;
    st.health = *health;
    if (*health == core::LinkHealth::kDegraded) {
      st.capacity_fraction = o.capacity_bps / ctx_->topo.nominal().link(id).capacity.ToBitsPerSec();
    }
    ctx_->plans->loop().RestoreLinkAdmin(id, st);
  }
}

}  // namespace crux::daemon
