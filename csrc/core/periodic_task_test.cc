// PeriodicTask: calls while started, none begun after stop(), the function replaced by a
// later start(), a call that throws counted and the next still made, and a task destroyed
// while started ends its calls.
#include "core/periodic_task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/stats.h"

namespace proton {
namespace {

using std::chrono::milliseconds;

// The calls are counted in statics: the task's thread may outlive a test's locals.
std::atomic<int> firstCalls{0}, secondCalls{0}, throwingCalls{0}, droppedCalls{0};

// Polls (up to 10 s) until `counter` reaches `n`.
bool reaches(const std::atomic<int> &counter, int n) {
  for (int i = 0; i < 10000 && counter.load() < n; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  return counter.load() >= n;
}

TEST(PeriodicTask, CallsWhileStartedAndBeginsNoCallAfterStop) {
  PeriodicTask task;
  task.start(milliseconds(1), [] { ++firstCalls; });
  ASSERT_TRUE(reaches(firstCalls, 3));
  task.stop();
  const int atStop = firstCalls.load();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_LE(firstCalls.load() - atStop, 1);  // at most the one under way when stop() came

  task.start(milliseconds(1), [] { ++secondCalls; });  // the thread is kept, the function replaced
  ASSERT_TRUE(reaches(secondCalls, 3));
  const int firstAfterRestart = firstCalls.load();
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(firstCalls.load(), firstAfterRestart);
  task.stop();
}

TEST(PeriodicTask, ACallThatThrowsIsCountedAndTheNextOneStillMade) {
  Counter &errors = Stats::global().counter("periodic_task_errors");
  const uint64_t before = errors.value();
  PeriodicTask task;
  task.start(milliseconds(1), [] {
    ++throwingCalls;
    throw std::runtime_error("no");
  });
  ASSERT_TRUE(reaches(throwingCalls, 3));
  task.stop();
  EXPECT_GE(errors.value(), before + 2);
}

TEST(PeriodicTask, ATaskDestroyedWhileStartedMakesNoMoreCalls) {
  {
    PeriodicTask task;
    task.start(milliseconds(1), [] { ++droppedCalls; });
    ASSERT_TRUE(reaches(droppedCalls, 2));
  }
  const int atEnd = droppedCalls.load();
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_LE(droppedCalls.load() - atEnd, 1);
}

}  // namespace
}  // namespace proton
