// LaunchTable under a long steady stream of launches, as a training loop produces them.
#include "backends/launch_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/session.h"
#include "core/stats.h"

namespace proton {
namespace {

uint64_t overwritten() {
  return Stats::global().counter("launch_correlations_overwritten").value();
}

// Launches take every `stride`-th correlation id (other API calls take the rest) and their
// records arrive `lag` launches later, in order.
void stream(LaunchTable &table, Session &session, uint64_t launches, uint64_t stride,
            uint64_t lag) {
  LaunchEntry e{&session, kRootNode, PhaseId{0}};
  LaunchInfo info;
  for (uint64_t i = 0; i < launches + lag; ++i) {
    if (i < launches) table.record(1 + i * stride, &e, 1, false, 0, 0);
    if (i >= lag) ASSERT_TRUE(table.resolve(1 + (i - lag) * stride, info)) << i;
  }
}

TEST(LaunchTableTest, LaunchesSettledCatchUpWithAMarkWhileLaterOnesStayOutstanding) {
  // A flush's wait: the launches recorded before it began are settled, whatever other threads
  // launched since.
  Session session(SessionId{0}, SessionOptions{});
  LaunchTable table(64);
  LaunchEntry e{&session, kRootNode, PhaseId{0}};
  for (uint64_t c = 1; c <= 3; ++c) table.record(c, &e, 1, false, 0, 0);
  table.record(4, &e, 1, /*multi=*/true, 0, 0);  // a graph launch: nothing pending
  const int64_t owed = table.recordedSoFar();
  EXPECT_EQ(owed, 3);
  for (uint64_t c = 5; c <= 6; ++c) table.record(c, &e, 1, false, 0, 0);
  LaunchInfo info;
  ASSERT_TRUE(table.resolve(2, info));
  ASSERT_TRUE(table.resolve(1, info));
  ASSERT_TRUE(table.resolve(1, info));  // a second record of one launch settles nothing more
  EXPECT_EQ(table.settledSoFar(), 2);
  table.cancel(3);  // captured into a graph: no record will come
  EXPECT_EQ(table.settledSoFar(), owed);
  EXPECT_EQ(table.outstanding(), 2);
}

TEST(LaunchTableTest, SteadyStreamWithinCapacityIsNeverOverwritten) {
  Session session(SessionId{0}, SessionOptions{});
  LaunchTable table(1 << 12);
  uint64_t before = overwritten();
  // Up to 3,500 ids between a launch and its record: within the 4,096-slot ring.
  for (uint64_t stride : {1, 3, 7}) stream(table, session, 200'000, stride, 500);
  EXPECT_EQ(overwritten(), before);
  EXPECT_EQ(table.outstanding(), 0);
  EXPECT_EQ(session.pendingIn(PhaseId{0}), 0);
}

TEST(LaunchTableTest, LaunchesWhoseRecordsNeverComeDoNotCrowdOutLaterOnes) {
  Session session(SessionId{0}, SessionOptions{});
  LaunchTable table(1 << 12);
  LaunchEntry e{&session, kRootNode, PhaseId{0}};
  LaunchInfo info;
  uint64_t before = overwritten();
  uint64_t lost = 0, leaked = 0;
  const uint64_t lag = 1'000;
  for (uint64_t i = 0; i < 300'000 + lag; ++i) {
    if (i < 300'000) table.record(1 + i, &e, 1, false, 0, 0);
    if (i < 300'000 && i % 3 == 0) ++leaked;
    // Every third launch never gets a record; the others arrive `lag` launches later.
    if (i >= lag && (i - lag) % 3 != 0 && !table.resolve(1 + i - lag, info)) ++lost;
  }
  EXPECT_EQ(lost, 0u);
  // The never-completed launches were given up and counted, once a ring of ids older; those
  // of the last ring are still held.
  uint64_t held = 0;
  for (uint64_t i = 300'000 - 4'096; i < 300'000; ++i) held += i % 3 == 0;
  EXPECT_EQ(overwritten() - before, leaked - held);
}

TEST(LaunchTableTest, OutOfOrderRecordsWithinCapacityAreAllMatched) {
  Session session(SessionId{0}, SessionOptions{});
  LaunchTable table(1 << 10);
  LaunchEntry e{&session, kRootNode, PhaseId{0}};
  LaunchInfo info;
  uint64_t before = overwritten();
  for (uint64_t round = 0; round < 1000; ++round) {
    uint64_t base = 1 + round * 500;
    for (uint64_t i = 0; i < 100; ++i) table.record(base + i * 5, &e, 1, false, 0, 0);
    for (uint64_t i = 100; i-- > 0;) ASSERT_TRUE(table.resolve(base + i * 5, info));
  }
  EXPECT_EQ(overwritten(), before);
  EXPECT_EQ(table.outstanding(), 0);
}

}  // namespace
}  // namespace proton

namespace proton {
namespace {

TEST(LaunchTableTest, ManyLaunchingThreadsAndALaggingResolverLoseNothing) {
  Session session(SessionId{0}, SessionOptions{});
  LaunchTable table(1 << 16);
  uint64_t before = overwritten();
  std::atomic<uint64_t> nextId{1};
  std::mutex idMu;
  std::mutex mu;
  std::deque<uint64_t> inFlight;  // launch ids in submission order, as the GPU runs them
  std::atomic<int> running{8};
  std::vector<std::thread> launchers;
  for (int t = 0; t < 8; ++t)
    launchers.emplace_back([&] {
      LaunchEntry e{&session, kRootNode, PhaseId{0}};
      for (int i = 0; i < 250'000; ++i) {
        // A launch queue is bounded: launching waits while 5,000 records are outstanding.
        while (table.outstanding() > 5'000) std::this_thread::yield();
        // Taken, recorded and queued for the "GPU" in one step: a thread descheduled in
        // between on a busy machine would otherwise hold a launch back from the resolver
        // while a whole ring of newer ids went by. Recording still races with resolving.
        std::lock_guard ids(idMu);
        uint64_t id = nextId.fetch_add(1 + i % 5);  // other API calls take ids too
        table.record(id, &e, 1, false, 0, 0);
        std::lock_guard lock(mu);
        inFlight.push_back(id);
      }
      running.fetch_sub(1);
    });
  uint64_t resolved = 0, missed = 0;
  LaunchInfo info;
  for (;;) {
    uint64_t id = 0;
    {
      std::lock_guard lock(mu);
      // Records lag up to 4,000 launches behind (about 12,000 ids), then arrive in order.
      if (inFlight.size() > 4'000 || (running.load() == 0 && !inFlight.empty())) {
        id = inFlight.front();
        inFlight.pop_front();
      } else if (running.load() == 0) {
        break;
      }
    }
    if (id == 0) continue;
    (table.resolve(id, info) ? resolved : missed)++;
  }
  for (auto &t : launchers) t.join();
  EXPECT_EQ(missed, 0u);
  EXPECT_EQ(resolved, 2'000'000u);
  EXPECT_EQ(overwritten(), before);
  EXPECT_EQ(table.outstanding(), 0);
}

}  // namespace
}  // namespace proton
