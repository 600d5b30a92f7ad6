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
#include <vector>

#include "crux/daemon/control/context.h"
#include "crux/daemon/rpc/gateway.h"
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
  // `gateway` counts refusals; `lag` is read for status.
  AdminService(DaemonContext* ctx, Gateway* gateway, const LagTracker* lag)
      : ctx_(ctx), gateway_(gateway), lag_(lag) {}

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
  // The link changes that touched the job (cruxctl job ID): JobDetail.faults and a sentence.
  void AddFaultReasoning(const std::string& job_id, v1::JobDetail* d) const;
  void Reply(const std::string& peer, const v1::Envelope& reply) const;

  v1::JobSummary Summary(const std::string& id, const JobSession& j);
  // Index of a job in the view's plan (-1: not planned). Cached per view.
  int PlanIndex(const std::string& id);
  void LinkLoads(std::vector<double>* load, std::vector<uint32_t>* jobs) const;
  v1::LinkInfo LinkInfoFor(core::LinkId id, const std::vector<double>& load,
                           const std::vector<uint32_t>& jobs) const;

  DaemonContext* ctx_;
  Gateway* gateway_;
  const LagTracker* lag_;
  const DaemonView* indexed_view_ = nullptr;
  std::map<std::string, int> plan_index_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RPC_ADMIN_H_
