// Admin endpoint handlers (cruxctl): status, jobs, job explain, links, set-link, plan dry run,
// switches.
#include "crux/daemon/rpc/admin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "crux/core/faults/fault_probes.h"
#include "crux/daemon/control/impact_report.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {
namespace {

std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

uint64_t UnixMsAt(const EventLoop& loop, core::Duration at) {
  const int64_t ms = loop.UnixMs() - (loop.Now() - at).nanos() / 1000000;
  return ms > 0 ? static_cast<uint64_t>(ms) : 0;
}

v1::FaultEvent FaultEventToProto(const EventLoop& loop, const TopologyManager& topo,
                                 const core::FaultEvent& e) {
  v1::FaultEvent out;
  out.set_at_unix_ms(UnixMsAt(loop, e.at));
  out.set_link(topo.Name(e.link));
  out.set_from(protocol::LinkHealthToProto(e.from));
  out.set_to(protocol::LinkHealthToProto(e.to));
  const double nominal = topo.nominal().link(e.link).capacity.ToBitsPerSec();
  out.set_capacity_bps(e.to == core::LinkHealth::kDown ? 0 : nominal * e.capacity_fraction);
  out.set_automatic(e.automatic);
  out.set_reason(e.reason.substr(0, 4000));
  for (const std::string& ev : e.evidence) out.add_evidence(ev.substr(0, 4000));
  constexpr size_t kMaxJobs = 200;
  for (size_t i = 0; i < e.jobs.size() && i < kMaxJobs; ++i) out.add_jobs(e.jobs[i]);
  return out;
}

std::set<uint32_t> JobLinks(const core::JobPlan& jp) {
  std::set<uint32_t> out;
  for (const auto& f : jp.flows) {
    for (core::LinkId l : f.path) out.insert(l.value());
  }
  return out;
}

}  // namespace

void LagTracker::Add(core::Duration lag) {
  const double ms = lag.ToMillis();
  if (samples_ms_.size() < kWindow) {
    samples_ms_.push_back(ms);
  } else {
    samples_ms_[next_] = ms;
  }
  next_ = (next_ + 1) % kWindow;
}

double LagTracker::PercentileMs(double p) const {
  if (samples_ms_.empty()) return 0;
  std::vector<double> v = samples_ms_;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

double LagTracker::MaxMs() const {
  return samples_ms_.empty() ? 0 : *std::max_element(samples_ms_.begin(), samples_ms_.end());
}

void AdminService::Reply(const std::string& peer, const v1::Envelope& reply) const {
  if (!sender_) return;
  if (core::Status s = sender_(peer, reply); !s.ok()) {
    spdlog::warn("admin reply not sent: {}", s.ToString());
  }
}

void AdminService::Process(const protocol::Inbound& in) {
  if (metrics_) metrics_->AddMessage("admin", protocol::BodyName(in.msg));
  const v1::Envelope& m = in.msg;
  const uint64_t rid = m.request_id();
  switch (m.body_case()) {
    case v1::Envelope::kStatusRequest:
      return Reply(in.peer, Status(rid));
    case v1::Envelope::kListJobsRequest:
      return Reply(in.peer, ListJobs(rid));
    case v1::Envelope::kJobRequest:
      return Reply(in.peer, Job(rid, m.job_request()));
    case v1::Envelope::kListLinksRequest:
      return Reply(in.peer, ListLinks(rid, m.list_links_request()));
    case v1::Envelope::kSetLinkRequest:
      return Reply(in.peer, SetLink(rid, m.set_link_request()));
    case v1::Envelope::kPlanDryRunRequest:
      return DryRun(rid, in.peer);
    case v1::Envelope::kListSwitchesRequest:
      return Reply(in.peer, ListSwitches(rid));
    case v1::Envelope::kListFaultsRequest:
      return Reply(in.peer, ListFaults(rid));
    case v1::Envelope::kImpactRequest:
      return Reply(in.peer, Impact(rid, m.impact_request()));
    default:
      return Reply(in.peer,
                   gateway_->Refuse("admin", rid,
                                    {v1::ERROR_CODE_INVALID_ARGUMENT,
                                     "envelope.body: '" + std::string(protocol::BodyName(m)) +
                                         "' is not a request the admin endpoint accepts"}));
  }
}

v1::Envelope AdminService::Status(uint64_t rid) const {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::StatusReply* s = e.mutable_status_reply();
  s->set_version(kCruxdVersion);
  s->set_uptime_ms(static_cast<uint64_t>((loop_->Now() - started_).nanos() / 1000000));
  const core::ControlLoop& loop = control_->loop();
  s->set_epoch(loop.epoch());
  s->set_jobs(static_cast<uint32_t>(tracker_->jobs().size()));
  std::map<std::string, uint32_t> by_state = {
      {"registered", 0}, {"profiling", 0}, {"scheduled", 0}};
  for (const auto& [id, j] : loop.jobs()) ++by_state[std::string(core::JobPhaseName(j.phase))];
  for (const auto& [state, n] : by_state) (*s->mutable_jobs_by_state())[state] = n;
  s->set_clients(static_cast<uint32_t>(tracker_->DistinctPeers()));
  s->set_switches(static_cast<uint32_t>(enforcer_->switch_count()));
  s->set_hosts(static_cast<uint32_t>(topo_->nominal().hosts().size()));
  s->set_links(static_cast<uint32_t>(topo_->nominal().num_links()));
  s->set_links_not_up(static_cast<uint32_t>(topo_->links_not_up()));
  s->set_levels(static_cast<uint32_t>(config_->planner.levels));
  s->set_dry_run(config_->dry_run);
  s->set_replans(applier_->replans());
  s->set_last_replan_ms(applier_->last_replan_ms());
  s->set_topology(topo_->source());
  s->set_state_path(DatabasePath(*config_));
  s->set_store_ok(store_health_->ok());
  s->set_store_error(store_health_->error());
  s->set_state_id(enforcer_->state_id());
  for (const auto& [reason, n] : refusals_->counts()) (*s->mutable_refusals())[reason] = n;
  s->set_quarantined_jobs(static_cast<uint32_t>(quarantined_jobs_));
  if (lag_) {
    s->set_loop_lag_p99_ms(lag_->PercentileMs(99));
    s->set_loop_lag_max_ms(lag_->MaxMs());
  }
  return e;
}

int AdminService::PlanIndex(const std::string& id) {
  const std::shared_ptr<const DaemonView>& view = applier_->view();
  if (view != indexed_view_) {
    plan_index_.clear();
    if (view && view->outcome) {
      for (size_t i = 0; i < view->outcome->planned.size(); ++i) {
        plan_index_[view->outcome->planned[i]] = static_cast<int>(i);
      }
    }
    indexed_view_ = view;
  }
  auto it = plan_index_.find(id);
  return it == plan_index_.end() ? -1 : it->second;
}

v1::JobSummary AdminService::Summary(const std::string& id, const JobSession& j) {
  v1::JobSummary s;
  s.set_job_id(id);
  s.set_tenant(j.demand.tenant);
  const core::LoopJob* lj = control_->loop().Find(id);
  s.set_state(protocol::JobPhaseToProto(lj ? lj->phase : core::JobPhase::kRegistered));
  uint32_t gpus = 0;
  for (const auto& p : j.demand.placement) gpus += p.gpus;
  s.set_gpus(gpus);
  s.set_hosts(static_cast<uint32_t>(j.demand.placement.size()));
  s.set_dscp(j.dscp);
  s.set_rank(-1);
  s.set_level(-1);
  const int index = PlanIndex(id);
  if (index >= 0) {
    const core::JobPlan& jp = applier_->view()->outcome->plan.jobs[static_cast<size_t>(index)];
    s.set_intensity(jp.intensity);
    s.set_k(jp.k);
    s.set_priority(jp.priority);
    s.set_rank(jp.rank);
    s.set_period_ms(jp.period.ToMillis());
  }
  if (const ImpactState* st = applier_->view()->impact.get(); st != nullptr && st->impact) {
    if (const auto it = st->index.find(id); it != st->index.end()) {
      const core::JobImpact& ji = st->impact->jobs[it->second];
      s.set_has_prediction(true);
      s.set_predicted_ms(ji.predicted.ToMillis());
      s.set_ecmp_ms(ji.ecmp.ToMillis());
      s.set_gain(ji.Gain());
    }
  }
  if (lj != nullptr && lj->profile && lj->profile->iteration_period > core::Duration::Zero()) {
    s.set_observed_ms(lj->profile->iteration_period.ToMillis());
  }
  if (const core::AppliedAssignment* a = control_->loop().Applied(id)) {
    s.set_level(a->assignment.level);
    s.set_epoch(a->epoch);
  }
  s.set_samples(lj && lj->profile ? lj->profile->samples : 0);
  s.set_last_seen_ms(static_cast<uint64_t>(j.last_seen_ms));
  return s;
}

v1::Envelope AdminService::Impact(uint64_t rid, const v1::ImpactRequest& req) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ImpactReply* r = e.mutable_impact_reply();
  const std::shared_ptr<const DaemonView>& view = applier_->view();
  const ImpactReport report =
      BuildImpactReport(view ? view->impact.get() : nullptr, control_->loop());
  r->set_available(report.available);
  r->set_error(report.error);
  r->set_epoch(report.epoch);
  r->set_plan_converged(report.plan_report.converged);
  r->set_ecmp_converged(report.ecmp_report.converged);
  r->set_plan_rounds(static_cast<uint32_t>(report.plan_report.rounds));
  r->set_ecmp_rounds(static_cast<uint32_t>(report.ecmp_report.rounds));
  r->set_jobs(static_cast<uint32_t>(report.rows.size()));
  r->set_gpus(static_cast<uint32_t>(report.gpus));
  r->set_gpus_recovered(report.gpus_recovered);
  r->set_observed(static_cast<uint32_t>(report.observed));
  r->set_error_p50(report.error_p50);
  r->set_error_p90(report.error_p90);
  const double threshold =
      req.error_threshold() > 0 ? req.error_threshold() : config_->impact.error_threshold;
  r->set_error_threshold(threshold);
  const size_t top = req.top() > 0 ? req.top() : 5;
  // Rows by GPUs recovered (gpus x gain), and by prediction error; ties by id.
  std::vector<const ImpactRow*> rows;
  for (const ImpactRow& row : report.rows) rows.push_back(&row);
  auto recovered = [](const ImpactRow* a) { return a->gpus * a->gain; };
  std::sort(rows.begin(), rows.end(), [&](const ImpactRow* a, const ImpactRow* b) {
    return recovered(a) != recovered(b) ? recovered(a) > recovered(b) : a->id < b->id;
  });
  auto add = [&](google::protobuf::RepeatedPtrField<v1::JobSummary>* out, const ImpactRow& row) {
    if (const JobSession* j = tracker_->Find(row.id)) *out->Add() = Summary(row.id, *j);
  };
  for (size_t i = 0; i < rows.size() && static_cast<size_t>(r->gainers_size()) < top; ++i) {
    if (recovered(rows[i]) > 0) add(r->mutable_gainers(), *rows[i]);
  }
  for (size_t i = rows.size(); i-- > 0 && static_cast<size_t>(r->losers_size()) < top;) {
    if (recovered(rows[i]) < 0) add(r->mutable_losers(), *rows[i]);
  }
  std::sort(rows.begin(), rows.end(), [](const ImpactRow* a, const ImpactRow* b) {
    const double ea = a->error.value_or(-1), eb = b->error.value_or(-1);
    return ea != eb ? ea > eb : a->id < b->id;
  });
  for (size_t i = 0; i < rows.size() && static_cast<size_t>(r->mispredicted_size()) < top; ++i) {
    if (rows[i]->error && *rows[i]->error > threshold) add(r->mutable_mispredicted(), *rows[i]);
  }
  return e;
}

v1::Envelope AdminService::ListJobs(uint64_t rid) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListJobsReply* r = e.mutable_list_jobs_reply();
  for (const auto& [id, j] : tracker_->jobs()) *r->add_jobs() = Summary(id, j);
  return e;
}

void AdminService::AddParts(const std::string& id, const JobSession& j, v1::JobDetail* d) const {
  const core::Topology& names = topo_->nominal();
  const core::Duration now = loop_->Now();
  for (const auto& [host, part] : j.parts) {
    v1::JobPart* p = d->add_parts();
    p->set_host(names.node(host).name);
    p->set_gpus(part.placement.gpus);
    p->set_local_ranks(part.info.local_ranks);
    p->set_hosts_expected(part.info.hosts_expected);
    p->set_connected(!part.peer.empty() && now < part.deadline);
    p->set_last_seen_ms(static_cast<uint64_t>(part.last_seen_ms));
    p->set_acked_epoch(part.acked_epoch);
    if (const PartReportEntry* e = parts_->Find(id, host)) {
      p->set_last_report_ms(static_cast<uint64_t>(e->received_ms));
      p->set_samples(e->report.profile.samples);
      p->set_period_ms(e->report.profile.iteration_period.ToMillis());
      p->set_converged(e->report.profile.converged);
      p->set_comms(static_cast<uint32_t>(e->report.comms.size()));
    }
  }
  if (const core::HostPartMergeStats* st = parts_->LastStats(id)) {
    v1::JobMerge* m = d->mutable_merge();
    m->set_parts(st->parts);
    m->set_parts_reporting(st->parts_reporting);
    m->set_hosts_expected(st->hosts_expected);
    m->set_complete(st->complete);
    m->set_cross_host_bytes(static_cast<uint64_t>(st->cross_host.count()));
    m->set_same_host_bytes(static_cast<uint64_t>(st->same_host.count()));
    m->set_unsplit_bytes(static_cast<uint64_t>(st->unsplit.count()));
    m->set_unattributed_bytes(static_cast<uint64_t>(st->unattributed.count()));
    m->set_conflicting_ranks(st->conflicting_ranks);
  }
}

v1::Envelope AdminService::Job(uint64_t rid, const v1::JobRequest& req) {
  const JobSession* j = tracker_->Find(req.job_id());
  if (!j) {
    return gateway_->Refuse(
        "admin", rid,
        {v1::ERROR_CODE_NOT_FOUND, "job_request.job_id: no job '" + req.job_id() + "'"});
  }
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::JobDetail* d = e.mutable_job_detail();
  *d->mutable_summary() = Summary(req.job_id(), *j);
  const core::Topology& names = topo_->nominal();
  for (const auto& p : j->demand.placement) d->add_hosts(names.node(p.host).name);
  d->set_model(j->demand.model);
  if (j->parted()) AddParts(req.job_id(), *j, d);
  const int index = PlanIndex(req.job_id());
  const int level = d->summary().level();
  const DaemonView& view = *applier_->view();
  if (index < 0) {
    std::string why;
    if (view.outcome && view.outcome->excluded.count(req.job_id())) {
      why = "The planner could not place it (" + view.outcome->excluded.at(req.job_id()) +
            "), so it keeps the top level 0 without pinned paths.";
    } else {
      why =
          "It has not described its traffic yet (no bytes per iteration, no profile), so it "
          "is not planned: it gets the temporary top level 0 and no pinned paths.";
    }
    d->set_explanation(why);
    AddFaultReasoning(req.job_id(), d);
    return e;
  }
  const core::Plan& plan = view.outcome->plan;
  const core::Topology& topo = *view.topology;
  const core::JobPlan& jp = plan.jobs[static_cast<size_t>(index)];
  d->set_work_flops(jp.work.value());
  d->set_comm_time_ms(jp.comm_time.ToMillis());
  if (jp.bottleneck.valid()) d->set_bottleneck(topo_->Name(jp.bottleneck));
  d->set_reference(jp.reference);
  d->set_pair_gain(jp.pair_gain);
  d->set_pair_loss(jp.pair_loss);
  if (plan.reference_job >= 0 && static_cast<size_t>(plan.reference_job) < plan.jobs.size()) {
    d->set_reference_job(plan.jobs[static_cast<size_t>(plan.reference_job)].id);
  }
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
    c->set_other_job(view.outcome->planned[static_cast<size_t>(other)]);
    c->set_weight(edge.weight);
    c->set_above(edge.to == index);
    (edge.to == index ? above : below) += 1;
    for (uint32_t l : JobLinks(op)) {
      if (mine.count(l)) c->add_links(topo_->Name(core::LinkId(l)));
    }
  }
  std::string why = "I_j = " + Fmt(jp.intensity) + " FLOP/s, k_j = " + Fmt(jp.k) +
                    ", P_j = " + Fmt(jp.priority) + ": rank " + std::to_string(jp.rank) + " of " +
                    std::to_string(plan.jobs.size()) + ". ";
  const core::LoopJob* lj = control_->loop().Find(req.job_id());
  if (!lj || lj->phase != core::JobPhase::kScheduled) {
    why += "Its profile has not converged (" + std::to_string(d->summary().samples()) + " of " +
           std::to_string(config_->profiling_samples) +
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
  AddFaultReasoning(req.job_id(), d);
  return e;
}

void AdminService::AddFaultReasoning(const std::string& job_id, v1::JobDetail* d) const {
  const std::vector<const core::FaultEvent*> events =
      control_->loop().faults().EventsForJob(job_id);
  if (events.empty()) return;
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < events.size() && i < kShown; ++i) {
    *d->add_faults() = FaultEventToProto(*loop_, *topo_, *events[i]);
  }
  const core::FaultEvent& last = *events.front();
  std::string text = " Its flows crossed link " + topo_->Name(last.link) + " when it went " +
                     std::string(core::LinkHealthName(last.to)) + " (" +
                     (last.automatic ? "automatic: " : "admin") +
                     (last.automatic ? last.reason : "") + "), so it was re-planned around it";
  text += events.size() > 1 ? " (" + std::to_string(events.size()) + " link changes so far)." : ".";
  d->set_explanation(d->explanation() + text);
}

void AdminService::LinkLoads(std::vector<double>* load, std::vector<uint32_t>* jobs) const {
  const size_t n = topo_->current().num_links();
  load->assign(n, 0.0);
  jobs->assign(n, 0);
  if (!applier_->view()->outcome) return;
  for (const core::JobPlan& jp : applier_->view()->outcome->plan.jobs) {
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

v1::LinkInfo AdminService::LinkInfoFor(core::LinkId id, const std::vector<double>& load,
                                       const std::vector<uint32_t>& jobs) const {
  v1::LinkInfo i;
  i.set_name(topo_->Name(id));
  const core::LinkHealth health = topo_->health(id);
  i.set_health(protocol::LinkHealthToProto(health));
  const double cap = topo_->current().link(id).capacity.ToBitsPerSec();
  i.set_capacity_bps(health == core::LinkHealth::kDown ? 0 : cap);
  i.set_nominal_bps(topo_->nominal().link(id).capacity.ToBitsPerSec());
  i.set_load_bps(load[id.value()]);
  i.set_utilization(cap > 0 ? load[id.value()] / cap : 0);
  i.set_jobs(jobs[id.value()]);
  const core::FaultManager& fm = control_->loop().faults();
  if (fm.admin(id)) {
    i.set_admin(true);
    i.set_reason("admin");
  } else if (health != core::LinkHealth::kUp) {
    for (const core::LinkFaultView& v : fm.Links()) {
      if (v.link == id) i.set_reason(v.reason.substr(0, 4000));
    }
  }
  return i;
}

v1::Envelope AdminService::ListLinks(uint64_t rid, const v1::ListLinksRequest& r) {
  std::vector<double> load;
  std::vector<uint32_t> jobs;
  LinkLoads(&load, &jobs);
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListLinksReply* out = e.mutable_list_links_reply();
  for (uint32_t l = 0; l < topo_->current().num_links(); ++l) {
    const core::LinkId id(l);
    if (!r.all() && load[l] <= 0 && topo_->health(id) == core::LinkHealth::kUp) continue;
    *out->add_links() = LinkInfoFor(id, load, jobs);
  }
  return e;
}

v1::Envelope AdminService::SetLink(uint64_t rid, const v1::SetLinkRequest& r) {
  core::Result<std::vector<core::LinkId>> changed = core::InternalError("not run");
  std::string what;
  if (r.automatic()) {
    changed = faults_->HandBack(r.link());
    what = "handed back to automatic control";
  } else {
    core::Result<core::LinkHealth> health = protocol::LinkHealthFromProto(r.health());
    if (!health.ok()) {
      return gateway_->Refuse("admin", rid,
                              {v1::ERROR_CODE_INVALID_ARGUMENT,
                               "set_link_request.health: must be UP, DEGRADED or DOWN"});
    }
    changed = faults_->SetAdmin(r.link(), *health, r.capacity_bps());
    what = "pinned " + std::string(core::LinkHealthName(*health));
  }
  if (!changed.ok()) {
    const v1::ErrorCode code = changed.status().code() == core::StatusCode::kNotFound
                                   ? v1::ERROR_CODE_NOT_FOUND
                                   : v1::ERROR_CODE_INVALID_ARGUMENT;
    return gateway_->Refuse("admin", rid, {code, changed.status().message()});
  }
  spdlog::info("admin: link {} {} ({} directions changed)", r.link(), what, changed->size());
  std::vector<double> load;
  std::vector<uint32_t> jobs;
  LinkLoads(&load, &jobs);
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_set_link_reply();  // A reply body even when nothing changed.
  for (core::LinkId id : *changed) {
    *e.mutable_set_link_reply()->add_changed() = LinkInfoFor(id, load, jobs);
  }
  return e;
}

v1::Envelope AdminService::ListFaults(uint64_t rid) const {
  const core::FaultManager& fm = control_->loop().faults();
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListFaultsReply* out = e.mutable_list_faults_reply();
  out->set_automatic(fm.options().automatic);
  out->set_evaluations(fm.evaluations());
  const core::Topology& nominal = topo_->nominal();
  for (const core::LinkFaultView& v : fm.Links()) {
    v1::FaultInfo* f = out->add_links();
    f->set_link(topo_->Name(v.link));
    f->set_health(protocol::LinkHealthToProto(v.effective));
    const double cap = nominal.link(v.link).capacity.ToBitsPerSec();
    f->set_capacity_bps(v.effective == core::LinkHealth::kDown ? 0 : cap * v.effective_fraction);
    f->set_automatic(protocol::LinkHealthToProto(v.automatic));
    f->set_admin(v.admin.has_value());
    f->set_suspect(v.suspect);
    f->set_ambiguous(v.ambiguous);
    f->set_score(v.score);
    f->set_reason(v.reason.substr(0, 4000));
    for (const std::string& ev : v.evidence) f->add_evidence(ev.substr(0, 4000));
    f->set_since_unix_ms(UnixMsAt(*loop_, v.since));
    f->set_port_down(v.port_down);
    f->set_hold_s(v.hold.ToSeconds());
    f->set_downtime_s(v.downtime_s);
    f->set_changes(v.changes);
  }
  for (const core::ContradictedJob& c : fm.ContradictedJobs()) {
    v1::ContradictedJob* j = out->add_contradicted_jobs();
    j->set_job_id(c.job);
    j->set_since_unix_ms(UnixMsAt(*loop_, c.since));
    j->set_slow_flows(static_cast<uint32_t>(c.slow_flows));
    j->set_evaluations(c.evaluations);
    j->set_example(c.example.substr(0, 4000));
  }
  out->set_disbelieved_reports(fm.disbelieved_reports());
  // Coverage of the watched links by the applied flows and probes.
  {
    const core::Topology& topo = topo_->current();
    std::vector<char> by_flow(topo.num_links(), 0);
    std::vector<char> by_probe(topo.num_links(), 0);
    uint32_t probes = 0;
    for (const auto& [id, a] : control_->loop().applied()) {
      for (const core::FlowPin& f : a->assignment.flows) {
        for (core::LinkId l : f.path) {
          if (l.value() < by_flow.size()) by_flow[l.value()] = 1;
        }
      }
      for (const core::FlowPin& f : a->assignment.probes) {
        ++probes;
        for (core::LinkId l : f.path) {
          if (l.value() < by_probe.size()) by_probe[l.value()] = 1;
        }
      }
    }
    uint32_t flow_covered = 0, probe_covered = 0, unwatched = 0;
    const std::vector<core::LinkId> watched = core::WatchedLinks(topo);
    for (core::LinkId l : watched) {
      if (by_flow[l.value()]) {
        ++flow_covered;
      } else if (by_probe[l.value()]) {
        ++probe_covered;
      } else {
        if (++unwatched <= 100) out->add_unwatched(topo_->Name(l));
      }
    }
    out->set_watched_links(static_cast<uint32_t>(watched.size()));
    out->set_flow_covered(flow_covered);
    out->set_probe_covered(probe_covered);
    out->set_unwatched_total(unwatched);
    out->set_probes(probes);
    out->set_probing(fm.options().probes.enabled);
  }
  const auto& events = fm.events();
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    *out->add_events() = FaultEventToProto(*loop_, *topo_, *it);
  }
  return e;
}

void AdminService::DryRun(uint64_t rid, const std::string& peer) {
  control_->DryRun([this, rid, peer](PlanRun run) {
    const core::PlanOutcome& r = *run.outcome;
    if (!r.status.ok()) {
      Reply(peer,
            gateway_->Refuse("admin", rid,
                             {v1::ERROR_CODE_INTERNAL, "planner failed: " + r.status.ToString()}));
      return;
    }
    v1::Envelope e = protocol::NewEnvelope(rid);
    v1::PlanDryRunReply* out = e.mutable_plan_dry_run_reply();
    out->set_replan_ms(run.replan_ms);
    // Against what is in force now (the snapshot's applied plan).
    const core::AppliedPlan& applied = *run.snapshot->applied;
    for (const auto& entry : r.changed) {
      const core::Assignment& a = entry->assignment;
      auto it = applied.find(a.job_id);
      v1::PlanChange* c = out->add_changes();
      c->set_job_id(a.job_id);
      c->set_old_level(it == applied.end() ? -1 : it->second->assignment.level);
      c->set_new_level(a.level);
      uint32_t repinned = 0;
      if (it == applied.end()) {
        repinned = static_cast<uint32_t>(a.flows.size());
      } else {
        std::map<std::pair<uint32_t, uint32_t>, uint16_t> old;
        for (const auto& f : it->second->assignment.flows) {
          old[{f.src_nic.value(), f.dst_nic.value()}] = f.udp_sport;
        }
        for (const auto& f : a.flows) {
          auto o = old.find({f.src_nic.value(), f.dst_nic.value()});
          if (o == old.end() || o->second != f.udp_sport) ++repinned;
        }
      }
      c->set_flows_repinned(repinned);
    }
    for (const std::string& id : r.removed) {
      v1::PlanChange* c = out->add_changes();
      c->set_job_id(id);
      c->set_old_level(applied.at(id)->assignment.level);
      c->set_new_level(-1);
    }
    Reply(peer, e);
  });
}

v1::Envelope AdminService::ListSwitches(uint64_t rid) const {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ListSwitchesReply* out = e.mutable_list_switches_reply();
  for (auto& s : enforcer_->Switches(tracker_->SharedColours(), loop_->UnixMs())) {
    *out->add_switches() = std::move(s);
  }
  return e;
}

}  // namespace crux::daemon
