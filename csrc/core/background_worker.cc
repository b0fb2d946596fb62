#include "core/background_worker.h"

#include "core/stats.h"

namespace proton {

BackgroundWorker::~BackgroundWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundWorker::post(size_t bytes, std::function<void()> job) {
  std::unique_lock lock(mu_);
  // One job larger than the bound still runs, alone.
  changed_.wait(lock, [&] { return queuedBytes_ == 0 || queuedBytes_ + bytes <= maxQueuedBytes_; });
  jobs_.emplace_back(bytes, std::move(job));
  queuedBytes_ += bytes;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  lock.unlock();
  changed_.notify_all();
}

void BackgroundWorker::waitIdle() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

void BackgroundWorker::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    auto [bytes, job] = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      job();
    } catch (...) {
      Stats::global().counter("background_jobs_failed").add();
    }
    job = nullptr;  // what it held goes before the next one is waited for
    lock.lock();
    busy_ = false;
    queuedBytes_ -= bytes;
    changed_.notify_all();
  }
}

}  // namespace proton
