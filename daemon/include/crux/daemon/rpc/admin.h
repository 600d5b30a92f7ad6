// AdminService: the local admin endpoint (cruxctl). Reads the DaemonView the PlanApplier
// publishes at each commit (the applied plan, the last run's outcome and topology: immutable,
// so a reply never sees half a commit) plus the live sessions and switch registry. Requests:
// status, jobs, job explain (with the link changes that re-routed the job), links, set-link (admin
// pins; `automatic` hands a link back: fault_service.h), plan --dry-run (on the planner's worker,
// replied to asynchronously), switches, faults. Every request gets exactly one reply.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_RPC_ADMIN_H_
#define CRUX_DAEMON_RPC_ADMIN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/control/fault_service.h"
#include "crux/daemon/control/plan_applier.h"
#include "crux/daemon/rpc/gateway.h"
#include "crux/daemon/rpc/refusal_book.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/enforcer.h"
#include "crux/daemon/state/job_tracker.h"
#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/store_health.h"
#include "crux/protocol/server.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

// Event-loop lag samples (time from Post to run), for status and metrics.
class LagTracker {
 public:
  void Add(core::Duration lag);
  // The p-th percentile (0-100) and the maximum of the last kWindow samples, in ms.
  double PercentileMs(double p) const;
  double MaxMs() const;
  static constexpr size_t kWindow = 600;

 private:
  std::vector<double> samples_ms_;
  size_t next_ = 0;
};

class AdminService {
 public:
  // What the requests read (status, the published view, sessions, link health, switches) and
  // act on (set-link: `faults`; dry runs: `control`). `gateway` counts the refusals; `lag` is
  // read for status; `config` is the running one (reloads included). Every pointer must outlive
  // the service; `metrics` may be null.
  AdminService(const DaemonConfig* config, EventLoop* loop, Metrics* metrics,
               const TopologyManager* topo, const JobTracker* tracker, const PartProfiles* parts,
               const Enforcer* enforcer, ControlHost* control, FaultService* faults,
               const PlanApplier* applier, const StoreHealth* store_health,
               const RefusalBook* refusals, Gateway* gateway, const LagTracker* lag)
      : config_(config),
        loop_(loop),
        metrics_(metrics),
        topo_(topo),
        tracker_(tracker),
        parts_(parts),
        enforcer_(enforcer),
        control_(control),
        faults_(faults),
        applier_(applier),
        store_health_(store_health),
        refusals_(refusals),
        gateway_(gateway),
        lag_(lag),
        started_(loop->Now()) {}

  // Where replies go (the admin endpoint's Send). Set before the first message.
  void SetSender(Sender s) { sender_ = std::move(s); }
  // Stored jobs the restore could not serve (status.quarantined_jobs).
  void SetQuarantinedJobs(size_t n) { quarantined_jobs_ = n; }

  // Handles one admin message and sends its reply (now, or later for a dry run).
  void Process(const protocol::Inbound& in);

 private:
  v1::Envelope Status(uint64_t rid) const;
  v1::Envelope ListJobs(uint64_t rid);
  v1::Envelope Job(uint64_t rid, const v1::JobRequest& r);
  // A multi-host job's parts and merge statistics (JobDetail.parts, .merge).
  void AddParts(const std::string& id, const JobSession& j, v1::JobDetail* d) const;
  v1::Envelope ListLinks(uint64_t rid, const v1::ListLinksRequest& r);
  v1::Envelope SetLink(uint64_t rid, const v1::SetLinkRequest& r);
  void DryRun(uint64_t rid, const std::string& peer);
  v1::Envelope ListSwitches(uint64_t rid) const;
  // cruxctl faults: the fault manager's links (suspects, states, pins) and its event log.
  v1::Envelope ListFaults(uint64_t rid) const;
  // cruxctl impact: the shadow accounting of the plan in force (impact_report.h).
  v1::Envelope Impact(uint64_t rid, const v1::ImpactRequest& r);
  // The link changes that touched the job (cruxctl job ID): JobDetail.faults and a sentence.
  void AddFaultReasoning(const std::string& job_id, v1::JobDetail* d) const;
  void Reply(const std::string& peer, const v1::Envelope& reply) const;

  v1::JobSummary Summary(const std::string& id, const JobSession& j);
  // Index of a job in the view's plan (-1: not planned). Cached per view.
  int PlanIndex(const std::string& id);
  void LinkLoads(std::vector<double>* load, std::vector<uint32_t>* jobs) const;
  v1::LinkInfo LinkInfoFor(core::LinkId id, const std::vector<double>& load,
                           const std::vector<uint32_t>& jobs) const;

  const DaemonConfig* config_;
  EventLoop* loop_;
  Metrics* metrics_;
  const TopologyManager* topo_;
  const JobTracker* tracker_;
  const PartProfiles* parts_;
  const Enforcer* enforcer_;
  ControlHost* control_;
  FaultService* faults_;
  const PlanApplier* applier_;
  const StoreHealth* store_health_;
  const RefusalBook* refusals_;
  Gateway* gateway_;
  const LagTracker* lag_;
  const core::Duration started_;
  Sender sender_;
  size_t quarantined_jobs_ = 0;
  // The view plan_index_ was built for (kept, so that a new view never has its address).
  std::shared_ptr<const DaemonView> indexed_view_;
  std::map<std::string, int> plan_index_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RPC_ADMIN_H_
