#include "context/backward_borrow.h"

#include <sys/prctl.h>

#include <mutex>

#include "context/shadow_context.h"
#include "context/stack_join.h"
#include "core/fork_lock.h"

namespace proton {

std::atomic<uint64_t> gBackwardSerial{0};

namespace {

struct Published {
  BackwardToken token;
  std::shared_ptr<const ContextSnapshot> snapshot;
  const PythonStack *stack;
};

struct Registry {
  std::mutex mu;
  std::vector<Published> inFlight;  // entered last is last
  std::vector<std::string> prefixes;
  uint64_t prefixesVersion = 1;
  BackwardToken nextToken = 1;
};

Registry &registry() {
  static Registry *r = new Registry();  // never destroyed: worker threads may outlive exit
  return *r;
}

// mu held.
bool nameIsWorker(const Registry &r) {
  char name[32] = {0};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) return false;
  std::string_view view(name);
  for (const std::string &p : r.prefixes)
    if (!p.empty() && view.substr(0, p.size()) == p) return true;
  return false;
}

}  // namespace

BackwardToken enterBackward(std::shared_ptr<const ContextSnapshot> snapshot,
                            const PythonStack *callerStack) {
  Registry &r = registry();
  std::lock_guard guard(r.mu);
  BackwardToken token = r.nextToken++;
  r.inFlight.push_back(Published{token, std::move(snapshot), callerStack});
  gBackwardSerial.fetch_add(1, std::memory_order_release);
  return token;
}

void exitBackward(BackwardToken token) {
  Registry &r = registry();
  std::shared_ptr<const ContextSnapshot> dropped;  // released after the lock
  std::lock_guard guard(r.mu);
  for (size_t i = r.inFlight.size(); i-- > 0;) {
    if (r.inFlight[i].token != token) continue;
    dropped = std::move(r.inFlight[i].snapshot);
    r.inFlight.erase(r.inFlight.begin() + static_cast<std::ptrdiff_t>(i));
    gBackwardSerial.fetch_add(1, std::memory_order_release);
    return;
  }
}

size_t backwardsInFlight() {
  Registry &r = registry();
  std::lock_guard guard(r.mu);
  return r.inFlight.size();
}

void lockBackwardsForFork() { registry().mu.lock(); }

void unlockBackwardsAfterFork(bool inChild) {
  Registry &r = registry();
  if (inChild) {
    // The parent's snapshots are let go without running their destructors' atomics on
    // another thread's behalf: leaked, as the parent's sessions are.
    new (&r.inFlight) std::vector<Published>();
    gBackwardSerial.fetch_add(1, std::memory_order_release);
  }
  releaseAfterFork(r.mu, inChild);
}

void setBackwardWorkerPrefixes(std::vector<std::string> prefixes) {
  Registry &r = registry();
  std::lock_guard guard(r.mu);
  r.prefixes = std::move(prefixes);
  ++r.prefixesVersion;
  gBackwardSerial.fetch_add(1, std::memory_order_release);  // threads look at their names again
}

void setBackwardWorker(bool worker) {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.borrowRole = worker ? ThreadContext::kWorkerForced : ThreadContext::kNotWorkerForced;
  t.borrowSerial = 0;  // adopt at the next touch
}

void followBackwardSlow(ThreadContext &t, uint64_t serial) {
  Registry &r = registry();
  std::shared_ptr<const ContextSnapshot> snapshot;
  const PythonStack *stack = nullptr;
  {
    std::lock_guard guard(r.mu);
    if (t.borrowRole != ThreadContext::kWorkerForced &&
        t.borrowRole != ThreadContext::kNotWorkerForced && t.borrowPrefixes != r.prefixesVersion) {
      t.borrowRole = nameIsWorker(r) ? ThreadContext::kWorker : ThreadContext::kNotWorker;
      t.borrowPrefixes = r.prefixesVersion;
    }
    bool worker =
        t.borrowRole == ThreadContext::kWorker || t.borrowRole == ThreadContext::kWorkerForced;
    if (!worker) {
      t.borrowSerial = serial;
      return;
    }
    // Scopes of its own still open: adopt once they have closed (serial left behind).
    if (t.frames.size() > t.borrowedDepth) return;
    if (!r.inFlight.empty()) {
      snapshot = r.inFlight.back().snapshot;
      stack = r.inFlight.back().stack;
    }
  }
  t.borrowSerial = serial;
  if (!snapshot) return;  // no pass now: keep the last one (late launches of it stay with it)
  t.frames = snapshot->frames;
  t.mirrors = snapshot->mirrors;
  t.generation = snapshot->generation;
  t.borrowedDepth = t.frames.size();
  t.borrowedStack = stack;
  t.modulePath = snapshot->modulePath;
}

const PythonStack *withBorrowedStack(const ThreadContext &t, const PythonStack *own) {
  if (!t.borrowedStack) return own;
  return joinStacks(t.borrowedStack, own);
}

}  // namespace proton
