// ThreadContext: the shadow context of one thread: its open scopes, its state tag, and for
// each session the context nodes those scopes resolved to.
//
//   ThreadContext &t = ThreadContext::current();
//   std::lock_guard guard(t.lock);
//   t.frames.push_back({name, monotonicNs(), false});
//
// Owned by its thread; the lock (a spin flag, uncontended in steady state) exists only so
// that a new thread can copy the main thread's stack: a thread that first touches its context
// inherits the stack of the thread registered as main, as triton.profiler does.
//
// Mirror layout, one per session, indexed by session id:
//   frames:  [ f0 "model" ][ f1 "layer" ][ f2 "attn" ]      shadow depth 0..2
//   mirror:  [ {0, model, n3} ][ {2, attn, n9} ]            f1 entered while inactive
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "core/ids.h"
#include "core/metric.h"

namespace proton {

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) {
      }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

struct ScopeFrame {
  StringId name;
  uint64_t beginNs = 0;
  bool timed = false;                         // cpu_timed_scope
  std::shared_ptr<const MetricList> metrics;  // given at entry; kept for trace events
  uint64_t id = 0;                            // returned by enter_scope / exit_scope
};

struct MirrorEntry {
  uint32_t depth;  // index of the shadow frame
  StringId name;
  NodeId node;
};

struct SessionMirror {
  uint64_t epoch = 0;  // Session::epoch() when the nodes were resolved
  PhaseId phase;       // the phase they were resolved in
  std::vector<MirrorEntry> entries;
};

class ThreadContext {
 public:
  ThreadContext();
  ~ThreadContext();
  ThreadContext(const ThreadContext &) = delete;
  ThreadContext &operator=(const ThreadContext &) = delete;

  static ThreadContext &current();
  // Makes the calling thread the one new threads inherit their stack from.
  static void registerMainThread();

  SessionMirror &mirror(SessionId session) {
    if (static_cast<size_t>(session.value) >= mirrors.size()) mirrors.resize(session.value + 1);
    return mirrors[session.value];
  }

  SpinLock lock;
  std::vector<ScopeFrame> frames;
  StringId state;  // 0 = none
  std::vector<SessionMirror> mirrors;
  const uint64_t threadId;
  uint64_t scopeCounter = 0;
};

}  // namespace proton
