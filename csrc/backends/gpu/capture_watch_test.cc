// CaptureWatch: a flush's synchronisation of a context runs only while no capture is under
// way on it, waits for other threads' captures to end, never for the caller's own, and holds
// back captures that begin meanwhile.
#include "backends/gpu/capture_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace proton::gpu {
namespace {

using Outcome = CaptureWatch::Outcome;
using std::chrono::milliseconds;

int ctxA, ctxB, stream1, stream2;  // their addresses stand for handles

Outcome syncA(CaptureWatch &watch, int *runs, milliseconds limit = milliseconds(10000)) {
  return watch.whenNoCapture(&ctxA, limit, [runs] { ++*runs; });
}

TEST(CaptureWatch, RunsAtOnceWithNoCaptureOrOnlyCapturesOnOtherContexts) {
  CaptureWatch watch;
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs), Outcome::kRan);
  std::thread([&] { watch.beginning(&ctxB, &stream1); }).join();
  EXPECT_EQ(syncA(watch, &runs), Outcome::kRan);
  EXPECT_EQ(runs, 2);
}

// Inside its own capture a thread synchronises no context at all, not only the capture's.
TEST(CaptureWatch, TheCallersOwnCaptureIsNotSynchronisedNorWaitedFor) {
  for (int *captured : {&ctxA, &ctxB}) {
    CaptureWatch watch;
    watch.beginning(captured, &stream1);
    int runs = 0;
    EXPECT_EQ(syncA(watch, &runs), Outcome::kOwnCapture);
    EXPECT_EQ(runs, 0);
    watch.settled(&stream1, /*capturing=*/false);  // the capture ended
    EXPECT_EQ(syncA(watch, &runs), Outcome::kRan);
    EXPECT_EQ(runs, 1);
  }
}

TEST(CaptureWatch, WaitsForAnotherThreadsCaptureToEndThenRuns) {
  CaptureWatch watch;
  std::atomic<bool> begun{false}, ended{false};
  std::thread capturer([&] {
    watch.beginning(&ctxA, &stream1);
    begun = true;
    std::this_thread::sleep_for(milliseconds(30));
    ended = true;
    watch.settled(&stream1, /*capturing=*/false);
  });
  while (!begun) std::this_thread::yield();
  bool endedWhenRun = false;
  Outcome outcome =
      watch.whenNoCapture(&ctxA, milliseconds(10000), [&] { endedWhenRun = ended.load(); });
  capturer.join();
  EXPECT_EQ(outcome, Outcome::kRan);
  EXPECT_TRUE(endedWhenRun);
  EXPECT_EQ(watch.underWay(), 0u);
}

TEST(CaptureWatch, ACaptureThatOutlastsTheLimitTimesOutWithoutRunning) {
  CaptureWatch watch;
  std::thread([&] { watch.beginning(&ctxA, &stream1); }).join();
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs, milliseconds(5)), Outcome::kTimedOut);
  EXPECT_EQ(runs, 0);
}

TEST(CaptureWatch, ACaptureBeginningWhileTheFunctionRunsWaitsForIt) {
  CaptureWatch watch;
  std::atomic<bool> done{false};
  bool doneWhenBegun = false;
  std::thread capturer;
  Outcome outcome = watch.whenNoCapture(&ctxA, milliseconds(10000), [&] {
    capturer = std::thread([&] {
      watch.beginning(&ctxA, &stream1);
      doneWhenBegun = done.load();
    });
    std::this_thread::sleep_for(milliseconds(20));
    done = true;
  });
  capturer.join();
  EXPECT_EQ(outcome, Outcome::kRan);
  EXPECT_TRUE(doneWhenBegun);
  EXPECT_EQ(watch.underWay(), 1u);
}

TEST(CaptureWatch, ARuntimeCallSeenTwiceIsOneCaptureOnTheContextTheDriverCallGave) {
  CaptureWatch watch;
  std::thread([&] {
    watch.beginning(nullptr, &stream1);  // the runtime call's enter: no context current yet
    watch.beginning(&ctxB, &stream1);    // the driver call's enter
    watch.settled(&stream1, /*capturing=*/true);
    watch.settled(&stream1, /*capturing=*/true);
  }).join();
  EXPECT_EQ(watch.underWay(), 1u);
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs), Outcome::kRan);  // the capture is on context B
  EXPECT_EQ(runs, 1);
}

TEST(CaptureWatch, AnUnknownContextCountsAsEveryContext) {
  CaptureWatch watch;
  std::thread([&] { watch.beginning(nullptr, &stream1); }).join();
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs, milliseconds(5)), Outcome::kTimedOut);
  EXPECT_EQ(runs, 0);
}

TEST(CaptureWatch, AFailedBeginLeavesNoCaptureUnlessTheStreamWasCapturingAlready) {
  CaptureWatch watch;
  watch.beginning(&ctxA, &stream1);
  watch.settled(&stream1, /*capturing=*/false);  // the begin failed
  EXPECT_EQ(watch.underWay(), 0u);
  watch.beginning(&ctxA, &stream2);
  watch.settled(&stream2, /*capturing=*/true);  // began
  watch.beginning(&ctxA, &stream2);             // a second begin on it, which fails
  watch.settled(&stream2, /*capturing=*/true);  // the stream still captures
  EXPECT_EQ(watch.underWay(), 1u);
  watch.settled(&stream2, /*capturing=*/false);  // its end
  EXPECT_EQ(watch.underWay(), 0u);
}

TEST(CaptureWatch, EachThreadsPerThreadStreamIsACaptureOfItsOwn) {
  CaptureWatch watch;
  std::thread([&] { watch.beginning(&ctxA, kPerThreadStream); }).join();
  watch.beginning(&ctxA, kPerThreadStream);
  EXPECT_EQ(watch.underWay(), 2u);
  watch.settled(kPerThreadStream, /*capturing=*/false);  // this thread's ended
  EXPECT_EQ(watch.underWay(), 1u);
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs, milliseconds(5)), Outcome::kTimedOut);  // the other's goes on
}

TEST(CaptureWatch, CapturesAreForgottenWhenProtonStopsWatching) {
  CaptureWatch watch;
  std::thread([&] { watch.beginning(&ctxA, &stream1); }).join();
  watch.clear();  // the backend stopped: no end of that capture will be seen
  int runs = 0;
  EXPECT_EQ(syncA(watch, &runs), Outcome::kRan);
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace proton::gpu
