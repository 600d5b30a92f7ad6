#include "device_worker.h"

#include <utility>

namespace crux::switch_adapters {

DeviceWorker::DeviceWorker(SwitchAdapter& adapter)
    : adapter_(adapter), thread_([this] { Loop(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DeviceWorker::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
}

std::optional<DeviceWorker::Done> DeviceWorker::TakeDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return std::nullopt;
  std::optional<Done> out = std::move(done_);
  done_.reset();
  busy_ = false;
  return out;
}

bool DeviceWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void DeviceWorker::Loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || job_.has_value(); });
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = std::move(done);
    }
  }
}

}  // namespace crux::switch_adapters
