// BackgroundWorker: one thread that runs posted jobs in order, off the thread that posts them
// (a trace drain's decoding, off the launching thread). Each job weighs the bytes it holds:
// post() waits while the queued weight is past a bound, waitIdle() until every job has run.
//
//   BackgroundWorker worker(/*maxQueuedBytes=*/size_t{512} << 20);
//   worker.post(data.size(), [data = std::move(data)] { decode(data); });
//   worker.waitIdle();  // before reading what the jobs wrote
//
// Thread-safe. The thread starts with the first job; the destructor runs what is queued and
// joins it. A job that throws is counted (background_jobs_failed), the next ones still run.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace proton {

class BackgroundWorker {
 public:
  explicit BackgroundWorker(size_t maxQueuedBytes) : maxQueuedBytes_(maxQueuedBytes) {}
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker &) = delete;
  BackgroundWorker &operator=(const BackgroundWorker &) = delete;

  void post(size_t bytes, std::function<void()> job);
  void waitIdle();

 private:
  void run();

  const size_t maxQueuedBytes_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::pair<size_t, std::function<void()>>> jobs_;
  size_t queuedBytes_ = 0;  // of the queued jobs and the one running
  bool busy_ = false;       // a job is running
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace proton
