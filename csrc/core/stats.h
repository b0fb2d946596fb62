// Stats: named counters for everything lost, dropped or unmatched.
//
//   static Counter &dropped = Stats::global().counter("activity_records_dropped");
//   dropped.add();
//
// Every profile carries a snapshot of the table and the viewer shows non-zero entries, so
// nothing is lost silently. counter() registers once (takes a lock; call it at setup and keep
// the reference); add() is one relaxed atomic increment and safe from any thread, including
// vendor callbacks.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/fork_lock.h"

namespace proton {

class Counter {
 public:
  void add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }
  void reset() { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Stats {
 public:
  static Stats &global();
  // Around fork() (runtime/fork_safety.cc; core/fork_lock.h says how the lock is released).
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork(bool inChild) { releaseAfterFork(mu_, inChild); }

  // Returns the counter with this name, creating it at zero. The reference stays valid.
  Counter &counter(const std::string &name);

  using Snapshot = std::vector<std::pair<std::string, uint64_t>>;
  // Name and value of every registered counter, in registration order.
  Snapshot snapshot() const;
  // The same, less what each counter held in `start` (a session's own losses: a profile
  // counts what happened since its session started, not earlier sessions' losses).
  Snapshot since(const Snapshot &start) const;

  void resetAll();

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, Counter>> counters_;  // stable addresses
};

}  // namespace proton
