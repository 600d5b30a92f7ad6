// DeviceWorker: runs a SwitchAdapter's calls on a thread of its own, so that a slow or stalled
// device (a SIGSTOPped Redis costs a full command timeout per call) never blocks the switch
// agent's loop: hellos, pushes and replies keep flowing while an apply is in progress.
//
// One job at a time: Submit() hands over a job when the worker is idle; the loop picks the outcome
// up with TakeDone() (non-blocking) and decides what to do next (retry, reconcile, report). The
// worker never retries: an outcome is one Apply() (plus a ReadBack() after a successful one when
// asked, and an enforcement check after an apply that found the device in sync when asked, with
// an EnforcementVerifier: enforcement.h).
//
// Thread-safety: Submit/TakeDone/busy from one owner thread (the agent's loop); the adapter is
// used only on the worker's thread while the worker exists (and so is the verifier). The destructor
// waits for the call in progress (bounded by the backend's own timeouts).
#ifndef CRUX_SWITCH_ADAPTERS_AGENT_DEVICE_WORKER_H_
#define CRUX_SWITCH_ADAPTERS_AGENT_DEVICE_WORKER_H_

#include <cstdint>
#include <optional>
#include <thread>

#include "crux/core/base/status.h"
#include "crux/core/control/qos.h"
#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/enforcement.h"
#include "crux/sync/thread_annotations.h"

namespace crux::switch_adapters {

class DeviceWorker {
 public:
  enum class ReadBackWhen { kNever, kIfChanged, kAlways };
  struct Job {
    uint64_t id = 0;  // The caller's tag, returned in Done.
    core::SwitchQosState state;
    ReadBackWhen read_back = ReadBackWhen::kAlways;  // After a successful Apply only.
    // With a verifier: check enforcement against this plan after a successful Apply that wrote
    // nothing (the device held the state before this apply, so the switch had time to act on
    // it), at `verify_at` (monotonic; rates are measured between checks).
    std::optional<EnforcementPlan> verify;
    core::Duration verify_at;
  };
  struct Done {
    uint64_t id = 0;
    core::Result<ApplyResult> applied = core::InternalError("not run");
    // Set when a read back was asked for and the apply succeeded.
    std::optional<core::Result<core::SwitchQosState>> read_back;
    // Set when the check ran (see Job::verify).
    std::optional<core::Result<core::EnforcementCheck>> verified;
  };

  // `adapter` (and `verifier`, when not null) must outlive the worker. Starts the thread.
  explicit DeviceWorker(SwitchAdapter& adapter, EnforcementVerifier* verifier = nullptr);
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // REQUIRES: !busy().
  void Submit(Job job) CRUX_EXCLUDES(mu_);
  // The outcome of the submitted job once it is there (then the worker is idle again).
  std::optional<Done> TakeDone() CRUX_EXCLUDES(mu_);
  // A job was submitted and its outcome not taken yet.
  bool busy() const CRUX_EXCLUDES(mu_);

 private:
  void Loop() CRUX_EXCLUDES(mu_);

  SwitchAdapter& adapter_;         // Used on the worker thread only.
  EnforcementVerifier* verifier_;  // Likewise; may be null.
  mutable Mutex mu_;
  CondVar cv_;                                     // A job was submitted, or stop.
  std::optional<Job> job_ CRUX_GUARDED_BY(mu_);    // Submitted, not started.
  std::optional<Done> done_ CRUX_GUARDED_BY(mu_);  // Finished, not taken.
  bool busy_ CRUX_GUARDED_BY(mu_) = false;
  bool stop_ CRUX_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts after the members above exist.
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_AGENT_DEVICE_WORKER_H_
