#include "crux/daemon/control/control_host.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {

PlanRun PlanEngine::Run(std::shared_ptr<const core::PlanningSnapshot> snap,
                        std::shared_ptr<const core::Topology> topo, uint64_t topology_version,
                        const core::PlannerOptions& options, bool rows) {
  const auto start = std::chrono::steady_clock::now();
  PlanRun run;
  run.snapshot = snap;
  run.topology = topo;
  auto outcome = std::make_shared<core::PlanOutcome>();
  if (!policy_ || topology_ != topo || version_ != topology_version || !(options_ == options)) {
    core::PolicyOptions po;
    po.planner = options;
    po.resolve_ports = true;  // The daemon pins flows: clients need their UDP source ports.
    po.stable = options.stable;
    auto policy = core::MakePolicy("crux", *topo, po);
    if (!policy.ok()) {
      policy_.reset();
      outcome->status = policy.status();
      run.outcome = std::move(outcome);
      return run;
    }
    policy_ = std::move(policy).value();
    topology_ = topo;
    version_ = topology_version;
    options_ = options;
  }
  *outcome = core::RunPlan(*policy_, *topo, *snap, core::SteadyClock::Instance());
  if (rows && outcome->status.ok()) {
    const StoreCodec codec(*topo);
    run.rows.reserve(outcome->changed.size());
    for (const auto& applied : outcome->changed) {  // Stamped snapshot->epoch + 1.
      run.rows.push_back(codec.EncodePlanRow(*applied));
    }
  }
  run.outcome = std::move(outcome);
  run.replan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return run;
}

struct ControlHost::Mailbox {
  std::mutex mu;
  EventLoop* loop = nullptr;  // Null once the host is gone.
  ControlHost* host = nullptr;
};

ControlHost::ControlHost(EventLoop* loop, TopologyManager* topo,
                         core::ControlLoopOptions loop_options,
                         core::PlannerOptions planner_options, DoneCallback on_done,
                         Executor executor)
    : loop_(loop),
      topo_(topo),
      clock_(loop),
      control_(&clock_, &topo->nominal(), std::move(loop_options)),
      planner_options_(std::move(planner_options)),
      on_done_(std::move(on_done)),
      executor_(std::move(executor)),
      engine_(std::make_shared<PlanEngine>()),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->loop = loop;
  mailbox_->host = this;
}

ControlHost::~ControlHost() {
  std::lock_guard<std::mutex> lock(mailbox_->mu);
  mailbox_->loop = nullptr;
  mailbox_->host = nullptr;
}

core::Status ControlHost::SetPlannerOptions(const core::PlannerOptions& o) {
  CRUX_RETURN_IF_ERROR(core::ValidatePlannerOptions(o));
  if (!(o == planner_options_)) {
    planner_options_ = o;
    control_.Invalidate("planner options changed");
    Kick();
  }
  return core::Status::Ok();
}

std::shared_ptr<const core::Topology> ControlHost::CurrentTopology() {
  if (!topology_copy_ || topology_copy_version_ != topo_->version()) {
    topology_copy_ = std::make_shared<const core::Topology>(topo_->current());
    topology_copy_version_ = topo_->version();
  }
  return topology_copy_;
}

void ControlHost::Kick() {
  const std::optional<core::Duration> due = control_.due();
  if (!due) return;
  if (armed_ && armed_for_ <= *due) return;  // The armed timer fires first; it re-checks.
  armed_ = true;
  armed_for_ = *due;
  const uint64_t generation = ++generation_;
  const core::Duration wait = std::max(core::Duration::Zero(), *due - loop_->Now());
  // Through the mailbox: a timer that fires after the host is gone does nothing.
  loop_->RunAfter(wait, [mailbox = mailbox_, generation] {
    ControlHost* host = nullptr;
    {
      std::lock_guard<std::mutex> lock(mailbox->mu);
      host = mailbox->host;
    }
    if (host) host->Fire(generation);
  });
}

void ControlHost::Fire(uint64_t generation) {
  if (generation != generation_) return;  // A newer timer replaced this one.
  armed_ = false;
  std::shared_ptr<const core::PlanningSnapshot> snap = control_.StartPlan();
  if (!snap) {
    Kick();  // Not due yet (e.g. min_replan_interval) or in flight: re-arm if needed.
    return;
  }
  std::shared_ptr<const core::Topology> topo = CurrentTopology();
  const uint64_t version = topology_copy_version_;
  const core::PlannerOptions options = planner_options_;
  if (!executor_) {
    on_done_(engine_->Run(snap, topo, version, options, /*rows=*/true));
    return;
  }
  executor_([engine = engine_, snap, topo, version, options,
             mailbox = mailbox_](CancellationToken token) {
    if (token.stop_requested()) return;
    auto run = std::make_shared<PlanRun>(engine->Run(snap, topo, version, options, true));
    if (token.stop_requested()) return;
    std::lock_guard<std::mutex> lock(mailbox->mu);
    if (!mailbox->loop) return;
    mailbox->loop->Post([mailbox, run] {
      ControlHost* host = nullptr;
      {
        std::lock_guard<std::mutex> inner(mailbox->mu);
        host = mailbox->host;
      }
      if (host) host->on_done_(std::move(*run));
    });
  });
}

void ControlHost::DryRun(DryRunCallback done) {
  std::shared_ptr<const core::PlanningSnapshot> snap = control_.PeekSnapshot();
  std::shared_ptr<const core::Topology> topo = CurrentTopology();
  const uint64_t version = topology_copy_version_;
  const core::PlannerOptions options = planner_options_;
  // An engine of its own, new each time: a stable policy continues the plan its last Schedule
  // made, so a dry run on the real runs' engine would leave its plan behind for the next real
  // run. A new policy has no plan of its own; RunPlan seeds it with the plan in force, which is
  // what the real runs' policy continues too.
  auto engine = std::make_shared<PlanEngine>();
  if (!executor_) {
    done(engine->Run(snap, topo, version, options, /*rows=*/false));
    return;
  }
  executor_([engine = std::move(engine), snap, topo, version, options, mailbox = mailbox_,
             done = std::move(done)](CancellationToken token) mutable {
    if (token.stop_requested()) return;
    auto run = std::make_shared<PlanRun>(engine->Run(snap, topo, version, options, false));
    if (token.stop_requested()) return;
    std::lock_guard<std::mutex> lock(mailbox->mu);
    if (!mailbox->loop) return;
    mailbox->loop->Post([mailbox, run, done = std::move(done)] {
      bool alive = false;
      {
        std::lock_guard<std::mutex> inner(mailbox->mu);
        alive = mailbox->host != nullptr;
      }
      if (alive) done(std::move(*run));
    });
  });
}

}  // namespace crux::daemon
