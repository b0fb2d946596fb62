// ThreadContext: the shadow context of one thread: its open scopes, its state tag, and for
// each session the context nodes those scopes resolved to.
//
//   ThreadContext &t = ThreadContext::current();
//   std::lock_guard guard(t.lock);
//   t.frames.push_back({name, monotonicNs(), false});
//
// Owned by its thread; the lock (a spin flag, uncontended in steady state) exists only so
// that another thread can copy the stack. A Python thread adopts the stack its starting
// thread had at Thread.start() (see capture/adopt); any other thread, on first touch,
// inherits the stack of the thread registered as main, as triton.profiler does. A backward
// worker of a framework (context/backward_borrow.h) replaces such inherited frames with those
// of the thread that asked for the backward pass, once per pass.
// Framework frames (modules, operators; runtime/framework_frames.h) are entries of the same
// stack, marked `framework`, mirrored only in the sessions whose context lists the framework.
//
// Mirror layout, one per session, indexed by session id:
//   frames:  [ f0 "model" ][ f1 "layer" ][ f2 "attn" ]      shadow depth 0..2
//   mirror:  [ {0, model, n3} ][ {2, attn, n9} ]            f1 entered while inactive
// In a context="python" session a scope's node is ROOT/<Python frames at its entry>/<open
// scopes>, so each entry also keeps the (interned) stack it was entered under, and the mirror
// caches where launches from recent (stack, scopes, state) combinations were filed.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <new>
#include <vector>

#include "context/backward_borrow.h"
#include "context/python_context.h"
#include "core/check.h"
#include "core/ids.h"
#include "core/metric.h"
#include "core/tensor_metric.h"

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
  // Trace data: tensor metrics given at entry, copied then, filed into the scope's slice at
  // exit (handles are zeroed once bound or discarded; a copied stack shares them).
  std::shared_ptr<std::vector<PendingTensor>> entryTensors;
  // Frames a framework adapter pushed (context "torch"; framework_frames.h), seen only by
  // sessions whose context lists the framework. 0: a scope of the user's.
  uint8_t framework = 0;
  int32_t spliceDepth = -1;  // Python frames open at its entry (-1: not known; after them all)
  const PythonStack *outerModulePath = nullptr;  // a module frame: the module path before it
};

struct MirrorEntry {
  uint32_t depth;  // index of the shadow frame
  StringId name;
  NodeId node;
  uint64_t pathHash = 0;               // of the names of this entry and those before it
  const PythonStack *stack = nullptr;  // context="python": the frames it was entered under
  int32_t spliceDepth = -1;            // ScopeFrame::spliceDepth
};

// A per-thread direct-mapped table of 2^kBits entries by a 64-bit key, allocated at its first
// use (no memory where it is never used); a copy (a thread started with the context) starts
// empty; without memory, nothing is cached. Entries are checked by their user.
template <typename Entry, unsigned kBits>
class LazySlots {
 public:
  static constexpr size_t kSize = size_t{1} << kBits;

  LazySlots() = default;
  LazySlots(const LazySlots &) {}
  LazySlots &operator=(const LazySlots &) {
    entries_.reset();
    return *this;
  }
  LazySlots(LazySlots &&) = default;
  LazySlots &operator=(LazySlots &&) = default;

  // The slot of `key`, or null when the table could not be allocated.
  Entry *slot(uint64_t key) {
    if (PROTON_UNLIKELY(!entries_)) {
      entries_.reset(new (std::nothrow) std::array<Entry, kSize>());
      if (!entries_) return nullptr;
    }
    return &(*entries_)[(key * 0x9e3779b97f4a7c15ull) >> (64 - kBits)];
  }

 private:
  std::unique_ptr<std::array<Entry, kSize>> entries_;
};

// Where launches were filed in a context="python" session, by (stack, open scopes, state),
// checked against the mirror's epoch. A step of a compiled model launches from hundreds of
// sites (one line of Inductor's wrapper each), and with operator frames each site's key
// changes with its operator: 1024 entries keep a step's sites (16 missed on nearly every
// launch, and a miss walks the whole stack).
struct PythonNodeEntry {
  const PythonStack *stack = nullptr;
  uint64_t scopes = 0;  // pathHash of the innermost mirror entry, 0 for none
  StringId state;
  uint64_t epoch = 0;
  NodeId node;
};
using PythonNodeCache = LazySlots<PythonNodeEntry, 10>;

// A thread's children of the session's tree by (parent << 32 | name), for the frames it pushes
// (an operator or a scope entered again and again): Session::child takes the session's lock,
// which every thread and the record thread share. An entry holds for one epoch.
struct ChildNodeEntry {
  uint32_t parent = UINT32_MAX;
  uint32_t name = 0;
  uint32_t node = 0;
  uint64_t epoch = 0;
};
using ChildNodeCache = LazySlots<ChildNodeEntry, 9>;

struct SessionMirror {
  uint64_t epoch = 0;  // Session::epoch() when the nodes were resolved
  PhaseId phase;       // the phase they were resolved in
  std::vector<MirrorEntry> entries;
  PythonNodeCache launches;  // context="python" sessions only
  ChildNodeCache children;   // frames pushed by this thread (scopes, framework frames)
};

// What a thread hands to the threads it starts: its open scopes and their resolved nodes.
struct ContextSnapshot {
  std::vector<ScopeFrame> frames;
  std::vector<SessionMirror> mirrors;
  uint64_t generation = 0;
  const PythonStack *modulePath = nullptr;
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
  // Around fork() (runtime/fork_safety.cc). In the child the forking thread is the only thread:
  // it becomes the main thread and forgets where its scopes were filed (the parent's
  // sessions do not exist in the child).
  static void lockRegistryForFork();
  static void unlockRegistryAfterFork(bool inChild);
  static void afterForkInChild();

  // Copies this thread's stack, for a thread it is about to start.
  std::shared_ptr<const ContextSnapshot> capture();
  // Replaces this thread's stack with one captured by the thread that started it.
  void adopt(const ContextSnapshot &snapshot);
  // Drops everything recorded under an earlier profiling period (generation).
  void resetIfStale(uint64_t currentGeneration) {
    followBackward();
    if (PROTON_LIKELY(generation == currentGeneration)) return;
    for (ScopeFrame &f : frames)
      if (f.entryTensors) discardTensors(*f.entryTensors);
    discardTensors(launchTensors);
    frames.clear();
    mirrors.clear();
    state = StringId{};
    stateDetail = StringId{};
    launchPending = false;
    launchInFlight = false;
    generation = currentGeneration;
    borrowedDepth = 0;
    borrowedStack = nullptr;
    modulePath = nullptr;
  }
  // Backward attribution: a backward worker takes the context of the pass it runs.
  void followBackward() {
    uint64_t serial = gBackwardSerial.load(std::memory_order_acquire);
    if (PROTON_LIKELY(serial == borrowSerial)) return;
    followBackwardSlow(*this, serial);
  }

  SessionMirror &mirror(SessionId session) {
    if (static_cast<size_t>(session.value) >= mirrors.size()) mirrors.resize(session.value + 1);
    return mirrors[session.value];
  }

  SpinLock lock;
  std::vector<ScopeFrame> frames;
  StringId state;  // 0 = none
  // A second frame under the state, set with it (0 = none): the kernel whose launch
  // metadata is being evaluated, under __proton_launch_metadata.
  StringId stateDetail;
  std::vector<SessionMirror> mirrors;
  // Launch metadata (hook="triton") for the next kernel this thread launches: its frame is
  // renamed to launchName and launchMetrics are added to it. Consumed by that launch, which
  // holds it (launchInFlight) until the launch returns: a graph node captured by that launch
  // keeps it for its replays; a launch that ran gets the metrics when it returns.
  bool launchPending = false;
  bool launchInFlight = false;
  StringId launchName;
  MetricList launchMetrics;                  // reused: no allocation per launch once it has grown
  std::vector<PendingTensor> launchTensors;  // tensor metrics of the launch metadata
  // Proton's copy of tensor metric values is being launched by this thread (a kernel of its
  // own, SessionManager::MetricCopyPlacement): it is filed as
  // <context>[/metricCopyScope]/__proton_launch_metadata[/metricCopyKernel]/<metric>, where
  // metricCopyScope is a scope being entered (its values are copied before it opens) and
  // metricCopyKernel the kernel whose launch metadata gave them; the state tag is left out.
  bool metricCopy = false;
  StringId metricCopyScope, metricCopyKernel;
  const uint64_t threadId;
  uint64_t scopeCounter = 0;
  uint64_t generation = 0;  // SessionManager::generation() the stack belongs to

  // Backward attribution (context/backward_borrow.h).
  enum BorrowRole : uint8_t { kUnknownRole, kWorker, kNotWorker, kWorkerForced, kNotWorkerForced };
  uint8_t borrowRole = kUnknownRole;
  uint64_t borrowPrefixes = 0;  // the worker prefixes' version borrowRole was read with
  uint64_t borrowSerial = 0;    // gBackwardSerial last followed
  size_t borrowedDepth = 0;     // frames[0..borrowedDepth) are the pass caller's
  const PythonStack *borrowedStack = nullptr;  // the caller's stack at its backward() call
  // Framework frames: the module frames open now, as one interned list (for backward ties).
  const PythonStack *modulePath = nullptr;
};

}  // namespace proton
