// PlannerRunner: hosts the core pipeline (core::MakePolicy("crux")) in the daemon.
//
// Request(reason) debounces: the first request arms a timer of `debounce`; every request until
// it fires joins the same run (a burst of registrations is one re-plan). When it fires, the
// runner snapshots the tracker's jobs as JobSpecs (loop thread, cheap), plans the snapshot on the
// executor (cruxd: a worker thread, so message handling never waits for a re-plan; tests:
// inline), and posts one desired Assignment per job back to the loop (epoch 0: the daemon diffs
// against what is applied and stamps epochs).
//
// JobSpec of a job (see docs/daemon.md): hosts and GPUs from the placement; traffic from the
// profile's per-peer bytes (explicit flows, on the wire), else the profile's or registration's
// bytes_per_iteration with the registered pattern; compute time from the profile (100 ms before
// one arrives); W_j from the profile, the registration or the GPU peak. A job without any traffic
// figure is not planned (it gets the top level and no flows). Jobs the planner refuses (e.g. no
// path after links went down) are planned without and reported in `excluded`.
//
// Levels: REGISTERED / PROFILING jobs get the temporary top level 0 (the paper's newcomer
// rule; with reserved_high_levels >= 1 nobody else shares it); SCHEDULED jobs get their
// computed level.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_PLANNER_RUNNER_H_
#define CRUX_DAEMON_PLANNER_RUNNER_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/planner.h"
#include "crux/core/policy.h"
#include "crux/daemon/event_loop.h"
#include "crux/daemon/job_tracker.h"
#include "crux/daemon/topology_manager.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

struct PlanResult {
  core::Plan plan;
  std::vector<std::string> plan_jobs;             // Job id of plan.jobs[i].
  std::map<std::string, v1::Assignment> desired;  // Every live job; epoch 0.
  std::map<std::string, std::string> excluded;    // Job -> why it was not planned.
  double replan_ms = 0;
  std::string reason;
  bool ok = true;  // False: the planner failed for everyone (desired is empty).
  std::string error;
};

// The JobSpec for a job, or nullopt when it has no traffic figure yet.
core::Result<std::optional<core::JobSpec>> BuildJobSpec(const core::Topology& topo,
                                                        const JobEntry& job);

// Equal apart from the epoch.
bool SameAssignment(const v1::Assignment& a, const v1::Assignment& b);

// What a planning run needs, copied on the loop thread so the run itself can happen elsewhere.
struct PlanSnapshot {
  struct Job {
    std::string id;
    uint32_t dscp = 0;
    v1::JobState state = v1::JOB_STATE_REGISTERED;
    std::optional<core::JobSpec> spec;  // nullopt: no traffic figure (not planned).
    std::string spec_error;             // Non-empty: the spec could not be built.
  };
  std::shared_ptr<const core::Topology> topology;  // Current (health applied).
  uint64_t topology_version = 0;
  core::PlannerOptions options;
  std::vector<Job> jobs;  // Ordered by id.
  std::string reason;
};

// Runs snapshots through the "crux" policy; keeps the policy (and its caches) while the
// topology version and options stay the same. Not thread-safe: one engine per thread.
class PlanEngine {
 public:
  PlanResult Run(const PlanSnapshot& s);

 private:
  std::shared_ptr<const core::Topology> topology_;
  uint64_t version_ = 0;
  core::PlannerOptions options_;
  std::unique_ptr<core::SchedulingPolicy> policy_;
};

class PlannerRunner {
 public:
  using Callback = std::function<void(PlanResult)>;
  // Runs `work` off the loop thread (e.g. WorkerThread::Post); null = inline on the loop.
  using Executor = std::function<void(std::function<void()>)>;
  PlannerRunner(EventLoop* loop, TopologyManager* topo, JobTracker* tracker,
                core::PlannerOptions options, core::Duration debounce, Callback on_plan,
                Executor executor = nullptr);
  ~PlannerRunner();
  PlannerRunner(const PlannerRunner&) = delete;
  PlannerRunner& operator=(const PlannerRunner&) = delete;

  // Debounced (see the file comment). While a run is in flight, requests wait for it and then
  // start one more run (never two at once, never a lost event).
  void Request(const std::string& reason);
  void SetDebounce(core::Duration d) { debounce_ = d; }
  // Lower bound between the starts of two runs (caps the planner's CPU under constant churn).
  void SetMinInterval(core::Duration d) { min_interval_ = d; }
  core::Status SetOptions(const core::PlannerOptions& o);
  const core::PlannerOptions& options() const { return options_; }

  // Plans now on the calling (loop) thread, without side effects (PlanDryRun).
  PlanResult Compute(const std::string& reason);
  // The current state, ready to plan.
  std::shared_ptr<const PlanSnapshot> Snapshot(const std::string& reason);

  bool armed() const { return armed_; }
  bool in_flight() const { return in_flight_; }
  uint64_t runs() const { return runs_; }

 private:
  void Arm();
  void Fire();
  void Done(PlanResult r);

  // How a run on the executor reaches the runner: cleared when the runner goes away, so a run
  // that outlives it (see WorkerThread) delivers nowhere.
  struct Mailbox {
    std::mutex mu;
    EventLoop* loop = nullptr;
    PlannerRunner* runner = nullptr;
  };

  EventLoop* loop_;
  TopologyManager* topo_;
  JobTracker* tracker_;
  core::PlannerOptions options_;
  core::Duration debounce_;
  core::Duration min_interval_;
  std::optional<core::Duration> last_start_;
  Callback on_plan_;
  Executor executor_;
  std::shared_ptr<const core::Topology> topology_copy_;
  uint64_t topology_copy_version_ = 0;
  PlanEngine sync_engine_;                    // Loop thread (dry runs, inline runs).
  std::shared_ptr<PlanEngine> async_engine_;  // Executor thread.
  std::shared_ptr<Mailbox> mailbox_;
  bool armed_ = false;
  bool in_flight_ = false;
  bool pending_ = false;
  std::vector<std::string> reasons_;
  uint64_t runs_ = 0;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_PLANNER_RUNNER_H_
