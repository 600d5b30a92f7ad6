// PlanApplier: commits a finished run on the loop thread. The worker already did everything
// heavy (planning, assignments, the diff, switch states, store rows: plan_host.h); here the
// control loop's FinishPlan filters the jobs that left meanwhile, the batch is made durable in
// one store transaction (assignments, audit rows, the epoch), committed to the loop, pushed
// (assignments to their jobs' connections, states to the changed switches) and published to
// cruxctl as a new DaemonView. A batch that cannot be stored is not applied (nothing is pushed
// with an epoch that is not durable) and the loop retries the run with backoff. With `dry_run`
// the batch is only logged.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_PLAN_APPLIER_H_
#define CRUX_DAEMON_PLAN_APPLIER_H_

#include "crux/daemon/context.h"
#include "crux/daemon/plan_host.h"

namespace crux::daemon {

class PlanApplier {
 public:
  explicit PlanApplier(DaemonContext* ctx) : ctx_(ctx) {}

  void Apply(PlanRun run);

 private:
  void Publish(const PlanRun& run);

  DaemonContext* ctx_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_PLAN_APPLIER_H_
