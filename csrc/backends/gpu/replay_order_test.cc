// ReplayOrder through a driver with no GPU (fake_driver.h): which stream waits for
// which replay's event, and the host wait between two threads launching the same slots.
#include "backends/gpu/replay_order.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backends/gpu/fake_driver.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

const auto kStreamA = reinterpret_cast<Stream>(0x7777);
const auto kStreamB = reinterpret_cast<Stream>(0x8888);
constexpr uint64_t kSlots = 0x140000;  // the first captured slot's device address

uint64_t unordered() { return Stats::global().counter("graph_replays_unordered").value(); }

// A replay launched on a second stream before the first one's copies ran would write into the
// slots the first one is still copying out (before, the two replays' values were mixed): its
// stream waits for the event recorded after the first replay's copies. Replays on one stream
// wait for nothing: the stream orders them.
TEST(ReplayOrder, AReplayOnAnotherStreamWaitsForTheLastReplaysCopies) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  order.entering(driver, kSlots, kStreamA);
  EXPECT_TRUE(fake::streamWaits.empty());  // no replay before it
  order.done(driver, kStreamA, /*ran=*/true);
  ASSERT_EQ(fake::recordedEvents.size(), 1u);
  const Event first = fake::recordedEvents[0].first;
  EXPECT_EQ(fake::recordedEvents[0].second, kStreamA);

  order.entering(driver, kSlots, kStreamA);  // the same stream: in order already
  order.done(driver, kStreamA, true);
  EXPECT_TRUE(fake::streamWaits.empty());

  order.entering(driver, kSlots, kStreamB);
  ASSERT_EQ(fake::streamWaits.size(), 1u);
  EXPECT_EQ(fake::streamWaits[0], std::make_pair(kStreamB, first));  // one event, re-recorded
  order.done(driver, kStreamB, true);
  Stream last = nullptr;
  ASSERT_TRUE(order.lastReplay(kSlots, &last));
  EXPECT_EQ(last, kStreamB);

  // Other slots (another graph's) are not ordered after these.
  order.entering(driver, kSlots + 0x100, kStreamA);
  order.done(driver, kStreamA, true);
  EXPECT_EQ(fake::streamWaits.size(), 1u);
  EXPECT_EQ(fake::eventsMade, 2u);  // one event per group of slots
}

// A launch that failed (or went into a capture) copied nothing out: the replay to wait for is
// still the one before it.
TEST(ReplayOrder, ALaunchThatDidNotRunLeavesTheLastReplayToWaitFor) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  order.entering(driver, kSlots, kStreamA);
  order.done(driver, kStreamA, true);
  order.entering(driver, kSlots, kStreamB);
  order.done(driver, kStreamB, /*ran=*/false);
  EXPECT_EQ(fake::recordedEvents.size(), 1u);
  Stream last = nullptr;
  ASSERT_TRUE(order.lastReplay(kSlots, &last));
  EXPECT_EQ(last, kStreamA);
  // A stream being captured waits for nothing: its capture orders it (a wait on an event from
  // outside would join the capture to it).
  fake::capturingStream = kStreamB;
  order.entering(driver, kSlots, kStreamB);
  order.done(driver, kStreamB, false);
  EXPECT_EQ(fake::streamWaits.size(), 1u);  // the failed launch's wait only
}

// The per-thread default stream (and null) of two threads are two streams: a replay through
// it on another thread waits, on the same thread it does not.
TEST(ReplayOrder, ThePerThreadStreamsOfTwoThreadsAreTwoStreams) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  order.entering(driver, kSlots, kPerThreadStream);
  order.done(driver, kPerThreadStream, true);
  order.entering(driver, kSlots, kPerThreadStream);
  order.done(driver, kPerThreadStream, true);
  EXPECT_TRUE(fake::streamWaits.empty());
  std::thread other([&] {
    order.entering(driver, kSlots, kPerThreadStream);
    order.done(driver, kPerThreadStream, true);
  });
  other.join();
  ASSERT_EQ(fake::streamWaits.size(), 1u);
  EXPECT_EQ(fake::streamWaits[0].first, kPerThreadStream);
}

// Two threads launching executables of one graph at once: the second cannot wait for an event
// the first has not recorded yet, so it waits on the host until the first one's copies are
// enqueued, then its stream waits for them.
TEST(ReplayOrder, ASecondThreadWaitsForTheFirstThreadsCopiesToBeEnqueued) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  const uint64_t before = unordered();
  order.entering(driver, kSlots, kStreamA);  // this thread is inside its graph launch
  std::atomic<bool> entered{false};
  std::thread other([&] {
    order.entering(driver, kSlots, kStreamB);
    entered = true;
    order.done(driver, kStreamB, true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(entered.load());  // held back until this launch's copies are on stream A
  order.done(driver, kStreamA, true);
  other.join();
  EXPECT_TRUE(entered.load());
  ASSERT_EQ(fake::streamWaits.size(), 1u);
  EXPECT_EQ(fake::streamWaits[0], std::make_pair(kStreamB, fake::recordedEvents[0].first));
  EXPECT_EQ(unordered(), before);
}

// A launch whose exit never comes: when its callbacks went off with the backend, every hold
// is released (the next launch goes on at once); after an error on this thread's way out, its
// next graph launch releases what it still held.
TEST(ReplayOrder, HoldsWhoseExitWillNotComeAreReleased) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  const uint64_t before = unordered();
  std::thread lost([&] {
    order.beginLaunch();
    order.entering(driver, kSlots, kStreamA);  // and no done()
  });
  lost.join();
  order.releaseAll();  // the backend stopped
  order.beginLaunch();
  order.entering(driver, kSlots, kStreamB);
  order.done(driver, kStreamB, true);
  Stream last = nullptr;
  ASSERT_TRUE(order.lastReplay(kSlots, &last));
  EXPECT_EQ(last, kStreamB);

  order.beginLaunch();
  order.entering(driver, kSlots, kStreamA);  // this thread's exit never came
  order.beginLaunch();                       // its next graph launch
  std::thread other([&] {
    order.beginLaunch();
    order.entering(driver, kSlots, kStreamA);  // not held back
    order.done(driver, kStreamA, true);
  });
  other.join();
  EXPECT_EQ(unordered(), before);
}

// A destroyed stream's handle may come back as another stream: a replay on it waits for the
// last one as on any other stream. A destroyed context's events go with it; a mark held by a
// launch in progress stays, with no event to wait for.
TEST(ReplayOrder, DestroyedStreamsAndContextsLeaveNothingToWaitForWrongly) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  ReplayOrder order;
  order.beginLaunch();
  order.entering(driver, kSlots, kStreamA);
  order.done(driver, kStreamA, true);
  order.onStreamDestroying(kStreamA);
  order.beginLaunch();
  order.entering(driver, kSlots, kStreamA);  // a new stream with the old handle
  order.done(driver, kStreamA, true);
  ASSERT_EQ(fake::streamWaits.size(), 1u);
  EXPECT_EQ(fake::streamWaits[0].first, kStreamA);

  order.beginLaunch();
  order.entering(driver, kSlots, kStreamB);  // held while its context goes
  order.onContextDestroying(fake::kStreamContext);
  order.done(driver, kStreamB, false);
  Stream last = nullptr;
  EXPECT_FALSE(order.lastReplay(kSlots, &last));
  order.beginLaunch();
  order.entering(driver, kSlots, kStreamA);
  EXPECT_EQ(fake::streamWaits.size(), 2u);  // the one for kStreamB only: nothing since
  order.done(driver, kStreamA, true);
}

}  // namespace
}  // namespace proton::gpu
