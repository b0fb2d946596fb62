#include "core/stats.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace proton {
namespace {

using Snapshot = std::vector<std::pair<std::string, uint64_t>>;

TEST(StatsTest, NewCounterStartsAtZero) {
  Stats stats;
  EXPECT_EQ(stats.counter("dropped").value(), 0u);
  EXPECT_EQ(stats.snapshot(), (Snapshot{{"dropped", 0}}));
}

TEST(StatsTest, SameNameGivesSameCounter) {
  Stats stats;
  Counter &a = stats.counter("a");
  a.add();
  a.add(4);
  EXPECT_EQ(&stats.counter("a"), &a);
  EXPECT_EQ(stats.counter("a").value(), 5u);
}

TEST(StatsTest, SnapshotIsInRegistrationOrder) {
  Stats stats;
  stats.counter("zeta").add(3);
  stats.counter("alpha").add(1);
  stats.counter("mid");
  stats.counter("zeta").add(1);
  EXPECT_EQ(stats.snapshot(), (Snapshot{{"zeta", 4}, {"alpha", 1}, {"mid", 0}}));
}

TEST(StatsTest, ReferencesStayValidAsCountersAreAdded) {
  Stats stats;
  Counter &first = stats.counter("first");
  for (int i = 0; i < 1000; ++i) stats.counter("c" + std::to_string(i));
  first.add(7);
  EXPECT_EQ(stats.snapshot().front(), (std::pair<std::string, uint64_t>{"first", 7}));
  EXPECT_EQ(stats.snapshot().size(), 1001u);
}

TEST(StatsTest, ResetAllZeroesButKeepsNames) {
  Stats stats;
  stats.counter("a").add(2);
  stats.counter("b").add(3);
  stats.resetAll();
  EXPECT_EQ(stats.snapshot(), (Snapshot{{"a", 0}, {"b", 0}}));
}

// A session's profile counts its own losses: what each counter gained since the session
// started, counters registered later in full.
TEST(StatsTest, SinceSubtractsWhatEachCounterHeldAtTheStart) {
  Stats stats;
  stats.counter("early").add(5);
  stats.counter("quiet").add(2);
  Snapshot start = stats.snapshot();
  stats.counter("early").add(3);
  stats.counter("late").add(4);
  EXPECT_EQ(stats.since(start), (Snapshot{{"early", 3}, {"quiet", 0}, {"late", 4}}));
  // A counter reset since (a forked child) reads as it is.
  stats.resetAll();
  stats.counter("early").add(1);
  EXPECT_EQ(stats.since(start), (Snapshot{{"early", 1}, {"quiet", 0}, {"late", 0}}));
}

TEST(StatsTest, ConcurrentAddsAreExact) {
  Stats stats;
  Counter &c = stats.counter("hits");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) c.add();
    });
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(c.value(), 800000u);
}

TEST(StatsTest, GlobalIsOneInstance) { EXPECT_EQ(&Stats::global(), &Stats::global()); }

}  // namespace
}  // namespace proton
