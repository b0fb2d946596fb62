// PeriodicTask: calls a function every period on a thread of its own, while started.
//
//   PeriodicTask pump;
//   pump.start(std::chrono::milliseconds(100), [] { handOverRecords(); });
//   ...
//   pump.stop();  // no call begins after this returns (one under way may still finish)
//
// The thread is made at the first start() in a process (again in a child made by fork(),
// which does not inherit it), parks while stopped, and lives as long as the task's state,
// which it shares: a task destroyed while started stops. start() again replaces the function.
// stop() does not wait for a call under way, so it may be called while holding locks that
// the function takes. A call that throws is counted (periodic_task_errors); the next still runs.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace proton {

class PeriodicTask {
 public:
  PeriodicTask();
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask &) = delete;
  PeriodicTask &operator=(const PeriodicTask &) = delete;

  void start(std::chrono::milliseconds period, std::function<void()> fn);
  void stop();

  struct State;  // shared with the thread (periodic_task.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace proton
