#include "device_worker.h"

#include <utility>

namespace crux::switch_adapters {

DeviceWorker::DeviceWorker(SwitchAdapter& adapter, EnforcementVerifier* verifier)
    : adapter_(adapter), verifier_(verifier), thread_([this] { Loop(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void DeviceWorker::Submit(Job job) {
  {
    MutexLock lock(&mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.NotifyAll();
}

std::optional<DeviceWorker::Done> DeviceWorker::TakeDone() {
  MutexLock lock(&mu_);
  if (!done_) return std::nullopt;
  std::optional<Done> out = std::move(done_);
  done_.reset();
  busy_ = false;
  return out;
}

bool DeviceWorker::busy() const {
  MutexLock lock(&mu_);
  return busy_;
}

void DeviceWorker::Loop() {
  while (true) {
    Job job;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_, [this]() CRUX_REQUIRES(mu_) { return stop_ || job_.has_value(); });
      if (stop_) return;
      job = std::move(*job_);
      job_.reset();
    }
    Done done;
    done.id = job.id;
    done.applied = adapter_.Apply(job.state);
    if (done.applied.ok() &&
        (job.read_back == ReadBackWhen::kAlways ||
         (job.read_back == ReadBackWhen::kIfChanged && done.applied->changed()))) {
      done.read_back = adapter_.ReadBack();
    }
    if (verifier_ != nullptr && job.verify && done.applied.ok() && !done.applied->changed()) {
      done.verified = verifier_->Verify(*job.verify, job.verify_at);
    }
    {
      MutexLock lock(&mu_);
      done_ = std::move(done);
    }
  }
}

}  // namespace crux::switch_adapters
