#include "core/background_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/stats.h"

namespace proton {
namespace {

// Jobs run in the order they were posted, on another thread; waitIdle returns once all ran.
TEST(BackgroundWorkerTest, RunsJobsInOrderOffThePostingThread) {
  BackgroundWorker worker(1 << 20);
  std::vector<int> ran;
  std::thread::id poster = std::this_thread::get_id(), runner;
  for (int i = 0; i < 100; ++i)
    worker.post(1000, [&, i] {
      ran.push_back(i);
      runner = std::this_thread::get_id();
    });
  worker.waitIdle();
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_NE(runner, poster);
}

// A post waits while the queue holds its bound; a job over the bound runs alone.
TEST(BackgroundWorkerTest, APostWaitsWhileTheQueueIsFull) {
  BackgroundWorker worker(100);
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  worker.post(100, [&] {
    while (!release) std::this_thread::yield();
    ++done;
  });
  std::atomic<bool> posted{false};
  std::thread second([&] {
    worker.post(1000, [&] { ++done; });
    posted = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(posted);  // the first job still holds the queue's 100 bytes
  release = true;
  second.join();
  worker.waitIdle();
  EXPECT_EQ(done, 2);
}

// A job that throws is counted; the worker goes on with the next one.
TEST(BackgroundWorkerTest, AJobThatThrowsIsCountedAndTheNextRuns) {
  Counter &failed = Stats::global().counter("background_jobs_failed");
  uint64_t before = failed.value();
  BackgroundWorker worker(1 << 20);
  bool next = false;
  worker.post(1, [] { throw std::runtime_error("bad slot"); });
  worker.post(1, [&] { next = true; });
  worker.waitIdle();
  EXPECT_EQ(failed.value(), before + 1);
  EXPECT_TRUE(next);
}

// What is queued when the worker is destroyed still runs.
TEST(BackgroundWorkerTest, TheDestructorRunsWhatIsQueued) {
  int ran = 0;
  {
    BackgroundWorker worker(1 << 20);
    for (int i = 0; i < 10; ++i) worker.post(1, [&] { ++ran; });
  }
  EXPECT_EQ(ran, 10);
}

}  // namespace
}  // namespace proton
