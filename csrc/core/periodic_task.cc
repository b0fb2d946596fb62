#include "core/periodic_task.h"

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/stats.h"

namespace proton {

struct PeriodicTask::State {
  std::mutex mu;
  std::condition_variable changed;
  std::chrono::milliseconds period{100};
  std::function<void()> fn;
  bool running = false;
  bool gone = false;   // the task was destroyed: the thread ends
  pid_t threadOf = 0;  // the process whose thread serves this state (0: none yet)
};

namespace {

void loop(const std::shared_ptr<PeriodicTask::State> &s) {
  std::unique_lock lock(s->mu);
  for (;;) {
    s->changed.wait(lock, [&] { return s->running || s->gone; });
    if (s->gone) return;
    // Sleep a period, woken early only to stop or end.
    if (s->changed.wait_for(lock, s->period, [&] { return !s->running || s->gone; })) continue;
    std::function<void()> fn = s->fn;  // the call begins here: stop() after it does not undo it
    lock.unlock();
    try {
      fn();
    } catch (...) {
      Stats::global().counter("periodic_task_errors").add();
    }
    lock.lock();
  }
}

}  // namespace

PeriodicTask::PeriodicTask() : state_(std::make_shared<State>()) {}

PeriodicTask::~PeriodicTask() {
  std::lock_guard lock(state_->mu);
  state_->gone = true;
  state_->changed.notify_all();
}

void PeriodicTask::start(std::chrono::milliseconds period, std::function<void()> fn) {
  std::lock_guard lock(state_->mu);
  state_->period = period;
  state_->fn = std::move(fn);
  state_->running = true;
  if (state_->threadOf != getpid()) {
    state_->threadOf = getpid();
    std::thread([s = state_] { loop(s); }).detach();
  }
  state_->changed.notify_all();
}

void PeriodicTask::stop() {
  std::lock_guard lock(state_->mu);
  state_->running = false;
  state_->changed.notify_all();
}

}  // namespace proton
