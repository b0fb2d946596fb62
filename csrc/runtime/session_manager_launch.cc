// SessionManager's launch path: where a device launch by the calling thread belongs, the
// launch metadata (hook="triton") it consumes, and the context a CUDA-graph node captured
// now carries to its replays. Called from vendor callbacks: no shared lock, no throw.
#include "context/shadow_context.h"
#include "core/stats.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

Counter &typeConflicts() {
  static Counter &counter = Stats::global().counter("metrics_dropped_type_conflict");
  return counter;
}

}  // namespace

size_t SessionManager::launchContext(LaunchEntry *out, size_t max, uint64_t *threadId,
                                     StringId *launchName) {
  if (launchName) *launchName = StringId{};
  if (!profilingOn()) return 0;
  const PythonStack *stack = pythonLive() ? capturePythonStack() : nullptr;
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  *threadId = t.threadId;
  // The metadata belongs to this launch only: held until it returns (endLaunch).
  t.launchInFlight = t.launchPending;
  t.launchPending = false;
  bool named = t.launchInFlight;
  if (named && launchName) *launchName = t.launchName;
  size_t n = 0;
  for (auto &slot : live_) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!s || !s->active()) continue;
    NodeId node = contextNode(*s, t, stack);
    PhaseId phase = t.mirror(s->id()).phase;
    if (node == kNoNode) continue;  // its phase was cleared under us
    if (n < max) out[n] = LaunchEntry{s, node, phase, named};
    ++n;  // the caller counts entries past max
  }
  return n;
}

void SessionManager::endLaunch(const LaunchEntry *entries, size_t n, bool ran) {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  if (!t.launchInFlight) return;
  t.launchInFlight = false;
  if (!ran || t.launchMetrics.empty()) return;
  for (size_t i = 0; i < n; ++i) {
    const LaunchEntry &e = entries[i];
    if (!e.named || e.session->options().data != DataKind::kTree) continue;
    NodeId node = e.session->child(e.phase, e.node, t.launchName);
    if (node != kNoNode && !e.session->addMetrics(e.phase, node, t.launchMetrics).isOk())
      typeConflicts().add();
  }
}

void SessionManager::contextNames(std::vector<StringId> &out) {
  out.clear();
  const PythonStack *stack = pythonLive() ? capturePythonStack() : nullptr;
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  if (stack) out.insert(out.end(), stack->frames.begin(), stack->frames.end());
  for (const ScopeFrame &f : t.frames) out.push_back(f.name);
  if (t.state != StringId{}) out.push_back(t.state);
  if (t.stateDetail != StringId{}) out.push_back(t.stateDetail);
}

void SessionManager::captureContext(CaptureContext &out, bool inLaunch) {
  contextNames(out.names);
  out.notRecording.clear();
  for (auto &slot : live_) {
    Session *s = slot.load(std::memory_order_acquire);
    if (s && !s->active()) out.notRecording.push_back(s->id());
  }
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  bool metadata = inLaunch && t.launchInFlight;
  out.kernelName = metadata ? t.launchName : StringId{};
  if (metadata)
    out.metrics.assign(t.launchMetrics.begin(), t.launchMetrics.end());
  else
    out.metrics.clear();
}

void SessionManager::pushLaunchMetadata(StringId name, const MetricList &metrics) {
  if (!profilingOn()) return;
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  t.launchName = name;
  t.launchMetrics.assign(metrics.begin(), metrics.end());
  t.launchPending = true;
}

void SessionManager::popLaunchMetadata() {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.launchPending = false;
}

}  // namespace proton
