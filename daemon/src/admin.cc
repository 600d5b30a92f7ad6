// Admin endpoint handlers (cruxctl): status, jobs, job explain, links, set-link, plan dry run,
// switches. Part of Daemon (see daemon.h); runs on the loop thread.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "crux/daemon/daemon.h"
#include "crux/protocol/codec.h"

namespace crux::daemon {
namespace {

std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::set<uint32_t> JobLinks(const core::JobPlan& jp) {
  std::set<uint32_t> out;
  for (const auto& f : jp.flows) {
    for (core::LinkId l : f.path) out.insert(l.value());
  }
  return out;
}

}  // namespace

v1::Envelope Daemon::HandleAdmin(const protocol::Inbound& in) {
  const v1::Envelope& m = in.msg;
  const uint64_t rid = m.request_id();
  switch (m.body_case()) {
    case v1::Envelope::kStatusRequest:
      return AdminStatus(rid);
    case v1::Envelope::kListJobsRequest:
      return AdminListJobs(rid);
    case v1::Envelope::kJobRequest:
      return AdminJob(rid, m.job_request());
    case v1::Envelope::kListLinksRequest:
      return AdminListLinks(rid, m.list_links_request());
    case v1::Envelope::kSetLinkRequest:
      return AdminSetLink(rid, m.set_link_request());
    case v1::Envelope::kPlanDryRunRequest:
      return AdminPlanDryRun(rid);
    case v1::Envelope::kListSwitchesRequest:
      return AdminListSwitches(rid);
    default:
      return Refuse("admin", rid,
                    {v1::ERROR_CODE_INVALID_ARGUMENT,
                     "envelope.body: '" + std::string(protocol::BodyName(m)) +
                         "' is not a request the admin endpoint accepts"});
  }
}

v1::Envelope Daemon::AdminStatus(uint64_t rid) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::StatusReply* s = e.mutable_status_reply();
  s->set_version(kCruxdVersion);
  s->set_uptime_ms(static_cast<uint64_t>((loop_->Now() - started_).nanos() / 1000000));
  s->set_epoch(epoch_);
  s->set_jobs(static_cast<uint32_t>(tracker_.jobs().size()));
  for (const auto& [state, n] : tracker_.CountByState()) {
    (*s->mutable_jobs_by_state())[state] = static_cast<uint32_t>(n);
  }
  s->set_clients(static_cast<uint32_t>(tracker_.DistinctPeers()));
  s->set_switches(static_cast<uint32_t>(enforcer_.switch_count()));
  s->set_hosts(static_cast<uint32_t>(topo_.nominal().hosts().size()));
  s->set_links(static_cast<uint32_t>(topo_.nominal().num_links()));
  s->set_links_not_up(static_cast<uint32_t>(topo_.links_not_up()));
  s->set_levels(static_cast<uint32_t>(config_.planner.levels));
  s->set_dry_run(config_.dry_run);
  s->set_replans(replans_);
  s->set_last_replan_ms(last_replan_ms_);
  s->set_topology(topo_.source());
  s->set_state_path(DatabasePath(config_));
  s->set_store_ok(store_error_.empty());
  s->set_store_error(store_error_);
  s->set_state_id(state_id_);
  for (const auto& [reason, n] : refusals_) (*s->mutable_refusals())[reason] = n;
  s->set_quarantined_jobs(static_cast<uint32_t>(quarantined_jobs_));
  return e;
}

v1::JobSummary Daemon::Summary(const std::string& id, const JobEntry& j) const {
  v1::JobSummary s;
  s.set_job_id(id);
  s.set_tenant(j.registration.tenant());
  s.set_state(j.state);
  uint32_t gpus = 0;
  for (const auto& p : j.registration.placement()) gpus += p.gpus();
  s.set_gpus(gpus);
  s.set_hosts(static_cast<uint32_t>(j.registration.placement_size()));
  s.set_dscp(j.dscp);
  s.set_rank(-1);
  s.set_level(-1);
  if (last_plan_) {
    const auto& ids = last_plan_->plan_jobs;
    auto it = std::find(ids.begin(), ids.end(), id);
    if (it != ids.end()) {
      const core::JobPlan& jp = last_plan_->plan.jobs[static_cast<size_t>(it - ids.begin())];
      s.set_intensity(jp.intensity);
      s.set_k(jp.k);
      s.set_priority(jp.priority);
      s.set_rank(jp.rank);
      s.set_period_ms(jp.period.ToMillis());
    }
  }
  auto a = applied_.find(id);
  if (a != applied_.end()) {
    s.set_level(static_cast<int32_t>(a->second.level()));
    s.set_epoch(a->second.epoch());
  }
  s.set_samples(j.profile ? j.profile->samples() : 0);
  s.set_last_seen_ms(static_cast<uint64_t>(j.last_seen_ms));
  return s;
}

v1::Envelope Daemon::AdminListJobs(uint64_t rid) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListJobsReply* r = e.mutable_list_jobs_reply();
  for (const auto& [id, j] : tracker_.jobs()) *r->add_jobs() = Summary(id, j);
  return e;
}

v1::Envelope Daemon::AdminJob(uint64_t rid, const v1::JobRequest& req) {
  const JobEntry* j = tracker_.Find(req.job_id());
  if (!j) {
    return Refuse("admin", rid,
                  {v1::ERROR_CODE_NOT_FOUND, "job_request.job_id: no job '" + req.job_id() + "'"});
  }
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::JobDetail* d = e.mutable_job_detail();
  *d->mutable_summary() = Summary(req.job_id(), *j);
  for (const auto& p : j->registration.placement()) d->add_hosts(p.host());
  d->set_model(j->registration.model());
  const core::Topology& topo = topo_.current();
  int index = -1;
  if (last_plan_) {
    const auto& ids = last_plan_->plan_jobs;
    auto it = std::find(ids.begin(), ids.end(), req.job_id());
    if (it != ids.end()) index = static_cast<int>(it - ids.begin());
  }
  const int level = d->summary().level();
  if (index < 0) {
    std::string why;
    if (last_plan_ && last_plan_->excluded.count(req.job_id())) {
      why = "The planner could not place it (" + last_plan_->excluded.at(req.job_id()) +
            "), so it keeps the top level 0 without pinned paths.";
    } else {
      why =
          "It has not described its traffic yet (no bytes per iteration, no profile), so it "
          "is not planned: it gets the temporary top level 0 and no pinned paths.";
    }
    d->set_explanation(why);
    return e;
  }
  const core::Plan& plan = last_plan_->plan;
  const core::JobPlan& jp = plan.jobs[static_cast<size_t>(index)];
  d->set_work_flops(jp.work.value());
  d->set_comm_time_ms(jp.comm_time.ToMillis());
  if (jp.bottleneck.valid()) d->set_bottleneck(topo_.Name(jp.bottleneck));
  d->set_reference(jp.reference);
  for (const core::FlowPlan& f : jp.flows) {
    v1::FlowDetail* fd = d->add_flows();
    fd->set_src_nic(topo.node(f.src).name);
    fd->set_dst_nic(topo.node(f.dst).name);
    fd->set_bytes(static_cast<uint64_t>(f.bytes.count()));
    fd->set_udp_sport(f.udp_sport.value_or(0));
    if (!f.path.empty()) fd->add_path(topo.node(topo.link(f.path.front()).src).name);
    for (core::LinkId l : f.path) fd->add_path(topo.node(topo.link(l).dst).name);
    fd->set_num_paths(static_cast<uint32_t>(f.num_paths));
  }
  const std::set<uint32_t> mine = JobLinks(jp);
  int above = 0;
  int below = 0;
  for (const core::DagEdge& edge : plan.dag.edges) {
    if (edge.from != index && edge.to != index) continue;
    const int other = edge.from == index ? edge.to : edge.from;
    const core::JobPlan& op = plan.jobs[static_cast<size_t>(other)];
    v1::Contention* c = d->add_contends_with();
    c->set_other_job(last_plan_->plan_jobs[static_cast<size_t>(other)]);
    c->set_weight(edge.weight);
    c->set_above(edge.to == index);
    (edge.to == index ? above : below) += 1;
    for (uint32_t l : JobLinks(op)) {
      if (mine.count(l)) c->add_links(topo_.Name(core::LinkId(l)));
    }
  }
  std::string why = "I_j = " + Fmt(jp.intensity) + " FLOP/s, k_j = " + Fmt(jp.k) +
                    ", P_j = " + Fmt(jp.priority) + ": rank " + std::to_string(jp.rank) + " of " +
                    std::to_string(plan.jobs.size()) + ". ";
  if (j->state != v1::JOB_STATE_SCHEDULED) {
    why += "Its profile has not converged (" + std::to_string(d->summary().samples()) + " of " +
           std::to_string(config_.profiling_samples) +
           " samples), so as a newcomer it holds the temporary top level 0 (its computed level "
           "would be " +
           std::to_string(jp.level) + ").";
  } else if (above + below == 0) {
    why +=
        "It shares no link with any other job, so no ordering is needed and it sits on the "
        "first job level " +
        std::to_string(jp.level) + ".";
  } else {
    why += "It shares links with " + std::to_string(above + below) + " job(s) (" +
           std::to_string(above) + " with higher P_j, " + std::to_string(below) +
           " lower); the DAG compression (Algorithm 1) put it on level " +
           std::to_string(level >= 0 ? level : jp.level) + " of " + std::to_string(plan.levels) +
           " so that more intensive contending jobs are served first (cut weight " +
           Fmt(plan.cut_weight) + " of " + Fmt(plan.total_edge_weight) + ").";
  }
  d->set_explanation(why);
  return e;
}

void Daemon::LinkLoads(std::vector<double>* load, std::vector<uint32_t>* jobs) const {
  const size_t n = topo_.current().num_links();
  load->assign(n, 0.0);
  jobs->assign(n, 0);
  if (!last_plan_) return;
  for (const core::JobPlan& jp : last_plan_->plan.jobs) {
    const double period = jp.period.ToSeconds();
    std::set<uint32_t> seen;
    for (const core::FlowPlan& f : jp.flows) {
      const double bps = period > 0 ? f.bytes.ToBits() / period : 0;
      for (core::LinkId l : f.path) {
        if (l.value() >= n) continue;
        (*load)[l.value()] += bps;
        if (seen.insert(l.value()).second) ++(*jobs)[l.value()];
      }
    }
  }
}

v1::LinkInfo Daemon::LinkInfoFor(core::LinkId id, const std::vector<double>& load,
                                 const std::vector<uint32_t>& jobs) const {
  v1::LinkInfo i;
  i.set_name(topo_.Name(id));
  i.set_health(topo_.health(id));
  const double cap = topo_.current().link(id).capacity.ToBitsPerSec();
  i.set_capacity_bps(topo_.health(id) == v1::LINK_HEALTH_DOWN ? 0 : cap);
  i.set_nominal_bps(topo_.nominal().link(id).capacity.ToBitsPerSec());
  i.set_load_bps(load[id.value()]);
  i.set_utilization(cap > 0 ? load[id.value()] / cap : 0);
  i.set_jobs(jobs[id.value()]);
  return i;
}

v1::Envelope Daemon::AdminListLinks(uint64_t rid, const v1::ListLinksRequest& r) {
  std::vector<double> load;
  std::vector<uint32_t> jobs;
  LinkLoads(&load, &jobs);
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListLinksReply* out = e.mutable_list_links_reply();
  for (uint32_t l = 0; l < topo_.current().num_links(); ++l) {
    const core::LinkId id(l);
    if (!r.all() && load[l] <= 0 && topo_.health(id) == v1::LINK_HEALTH_UP) continue;
    *out->add_links() = LinkInfoFor(id, load, jobs);
  }
  return e;
}

v1::Envelope Daemon::AdminSetLink(uint64_t rid, const v1::SetLinkRequest& r) {
  auto changed = topo_.Set(r.link(), r.health(), r.capacity_bps());
  if (!changed.ok()) {
    const v1::ErrorCode code = changed.status().code() == core::StatusCode::kNotFound
                                   ? v1::ERROR_CODE_NOT_FOUND
                                   : v1::ERROR_CODE_INVALID_ARGUMENT;
    return Refuse("admin", rid, {code, changed.status().message()});
  }
  for (core::LinkId id : *changed) {
    const std::string name = topo_.Name(id);
    core::Status s = topo_.health(id) == v1::LINK_HEALTH_UP
                         ? store_->DeleteLinkOverride(name)
                         : store_->PutLinkOverride(
                               {name, topo_.health(id),
                                topo_.current().link(id).capacity.ToBitsPerSec(), loop_->UnixMs()});
    if (!s.ok()) spdlog::error("store: {}", s.ToString());
  }
  std::vector<double> load;
  std::vector<uint32_t> jobs;
  LinkLoads(&load, &jobs);
  v1::Envelope e = protocol::NewEnvelope(rid);
  for (core::LinkId id : *changed) {
    *e.mutable_set_link_reply()->add_changed() = LinkInfoFor(id, load, jobs);
  }
  e.mutable_set_link_reply();  // A reply body even when nothing changed.
  if (!changed->empty()) {
    spdlog::info("link {} set to {} ({} directions changed)", r.link(),
                 v1::LinkHealth_Name(r.health()), changed->size());
    runner_.Request("link " + r.link() + " " + v1::LinkHealth_Name(r.health()));
  }
  return e;
}

v1::Envelope Daemon::AdminPlanDryRun(uint64_t rid) {
  PlanResult r = runner_.Compute("dry run");
  if (!r.ok) {
    return Refuse("admin", rid, {v1::ERROR_CODE_INTERNAL, "planner failed: " + r.error});
  }
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::PlanDryRunReply* out = e.mutable_plan_dry_run_reply();
  out->set_replan_ms(r.replan_ms);
  for (const auto& [id, a] : r.desired) {
    auto it = applied_.find(id);
    if (it != applied_.end() && SameAssignment(it->second, a)) continue;
    v1::PlanChange* c = out->add_changes();
    c->set_job_id(id);
    c->set_old_level(it == applied_.end() ? -1 : static_cast<int32_t>(it->second.level()));
    c->set_new_level(static_cast<int32_t>(a.level()));
    uint32_t repinned = 0;
    if (it == applied_.end()) {
      repinned = static_cast<uint32_t>(a.flows_size());
    } else {
      std::map<std::pair<std::string, std::string>, const v1::FlowAssignment*> old;
      for (const auto& f : it->second.flows()) old[{f.src_nic(), f.dst_nic()}] = &f;
      for (const auto& f : a.flows()) {
        auto o = old.find({f.src_nic(), f.dst_nic()});
        if (o == old.end() || o->second->udp_sport() != f.udp_sport()) ++repinned;
      }
    }
    c->set_flows_repinned(repinned);
  }
  for (const auto& [id, a] : applied_) {
    if (r.desired.count(id)) continue;
    v1::PlanChange* c = out->add_changes();
    c->set_job_id(id);
    c->set_old_level(static_cast<int32_t>(a.level()));
    c->set_new_level(-1);
  }
  return e;
}

v1::Envelope Daemon::AdminListSwitches(uint64_t rid) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListSwitchesReply* out = e.mutable_list_switches_reply();
  for (auto& s : enforcer_.Switches(tracker_.SharedColours(), loop_->UnixMs()))
    *out->add_switches() = std::move(s);
  return e;
}

}  // namespace crux::daemon
