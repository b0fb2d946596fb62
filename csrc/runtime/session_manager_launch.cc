// SessionManager's launch path: where a device launch by the calling thread belongs, the
// launch metadata (hook="triton") it consumes, and the context a CUDA-graph node captured
// now carries to its replays. Called from vendor callbacks: no shared lock, no throw.
#include <optional>

#include "context/shadow_context.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {

size_t SessionManager::launchContext(LaunchEntry *out, size_t max, uint64_t *threadId,
                                     StringId *launchName) {
  if (launchName) *launchName = StringId{};
  if (!profilingOn()) return 0;
  const PythonStack *stack = captureStack();
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  stack = withBorrowedStack(t, stack);
  *threadId = t.threadId;
  size_t n = 0;
  if (t.metricCopy) {  // Proton's copy of tensor metric values: it consumes no metadata
    static const StringId kernel = StringTable::global().intern(kMetricCopyKernelName);
    if (launchName) *launchName = kernel;
    metricCopyContext(t, stack, out, max, n);
    return n;
  }
  // The metadata belongs to this launch only: held until it returns (endLaunch).
  t.launchInFlight = t.launchPending;
  t.launchPending = false;
  bool named = t.launchInFlight;
  if (named && launchName) *launchName = t.launchName;
  for (auto &slot : liveSlots()) {
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
  if (!ran || (t.launchMetrics.empty() && t.launchTensors.empty())) {
    discardTensors(t.launchTensors);
    return;
  }
  MetricTarget targets[LaunchInfo::kMaxEntries];
  size_t numTargets = 0;
  for (size_t i = 0; i < n; ++i) {
    const LaunchEntry &e = entries[i];
    if (!e.named || e.session->options().data != DataKind::kTree) continue;
    NodeId node = e.session->child(e.phase, e.node, t.launchName);
    if (node == kNoNode) continue;
    if (!t.launchMetrics.empty())
      if (Status st = e.session->addMetrics(e.phase, node, t.launchMetrics); !st.isOk())
        dropConflictingMetrics(st, t.launchName);
    if (!t.launchTensors.empty() && numTargets < LaunchInfo::kMaxEntries) {
      for (const PendingTensor &p : t.launchTensors)
        if (Status st =
                e.session->declareMetricTypes({{p.metric.spec, placeholderValue(p.metric.tensor)}});
            !st.isOk())
          dropConflictingMetrics(st, t.launchName);
      targets[numTargets++] = MetricTarget{e.session, e.phase, node};
    }
  }
  DeviceMetricSink *sink = deviceMetricSink();
  for (PendingTensor &p : t.launchTensors) {
    if (!p.handle || !sink) continue;
    if (numTargets > 0) {
      sink->bind(p.handle, p.metric.spec, targets, numTargets);
    } else {
      sink->discard(p.handle);
    }
  }
  t.launchTensors.clear();
}

void SessionManager::contextNames(std::vector<StringId> &out) {
  out.clear();
  const PythonStack *stack = captureStack();
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  appendContextNames(t, withBorrowedStack(t, stack), out);
  if (t.state != StringId{}) out.push_back(t.state);
  if (t.stateDetail != StringId{}) out.push_back(t.stateDetail);
}

void SessionManager::captureContext(CaptureContext &out, bool inLaunch) {
  contextNames(out.names);
  out.notRecording.clear();
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (s && !s->active()) out.notRecording.push_back(s->id());
  }
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  if (t.metricCopy) {  // Proton's copy kernel, captured: filed at each replay as when it runs
    static const StringId metadata = StringTable::global().intern(kMetadataScopeName);
    static const StringId kernel = StringTable::global().intern(kMetricCopyKernelName);
    if (t.stateDetail != StringId{} && !out.names.empty()) out.names.pop_back();
    if (t.state != StringId{} && !out.names.empty()) out.names.pop_back();
    for (StringId frame : {t.metricCopyScope, metadata, t.metricCopyKernel})
      if (frame != StringId{}) out.names.push_back(frame);
    out.kernelName = kernel;
    out.metrics.clear();
    return;
  }
  bool metadata = inLaunch && t.launchInFlight;
  out.kernelName = metadata ? t.launchName : StringId{};
  if (metadata)
    out.metrics.assign(t.launchMetrics.begin(), t.launchMetrics.end());
  else
    out.metrics.clear();
}

void SessionManager::pushLaunchMetadata(StringId name, const MetricList &metrics,
                                        const std::vector<TensorMetric> *tensors,
                                        StringId metadataKernel) {
  if (!profilingOn()) return;
  // Copied now, before the kernel runs: the value the metadata function saw. Launch metadata
  // metrics go to tree data only (as scalar ones do).
  std::vector<PendingTensor> copies;
  std::vector<const TensorMetric *> captured;
  DeviceMetricSink *sink = deviceMetricSink();
  std::optional<MetricCopyPlacement> placement;
  if (tensors && sink && !tensors->empty()) placement.emplace(StringId{}, metadataKernel);
  if (tensors && sink) {
    for (const TensorMetric &m : *tensors) {
      if (sink->capturing(m.tensor)) {
        captured.push_back(&m);
      } else {
        copies.push_back({m, sink->copy(m.tensor)});
      }
    }
  }
  const PythonStack *stack = !captured.empty() ? captureStack() : nullptr;
  CaptureContext context;
  {
    ThreadContext &t = ThreadContext::current();
    std::lock_guard guard(t.lock);
    t.resetIfStale(generation());
    if (stack) stack = withBorrowedStack(t, stack);
    discardTensors(t.launchTensors);  // an earlier metadata no launch consumed
    t.launchName = name;
    t.launchMetrics.assign(metrics.begin(), metrics.end());
    t.launchTensors = std::move(copies);
    t.launchPending = true;
    if (!captured.empty()) {
      captureContextLocked(t, stack, context);
      context.names.push_back(name);  // the kernel's frame, as its replays file it
    }
  }
  for (const TensorMetric *m : captured) sink->recordCaptured(*m, context, name);
}

void SessionManager::metricCopyContext(ThreadContext &t, const PythonStack *stack, LaunchEntry *out,
                                       size_t max, size_t &n) {
  static const StringId metadata = StringTable::global().intern(kMetadataScopeName);
  // Under the thread's context without its state tag (launch metadata is evaluated under one).
  StateTag state{t.state, t.stateDetail};
  t.state = t.stateDetail = StringId{};
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!s || !s->active()) continue;
    NodeId node = contextNode(*s, t, stack);
    PhaseId phase = t.mirror(s->id()).phase;
    for (StringId frame : {t.metricCopyScope, metadata, t.metricCopyKernel})
      if (frame != StringId{} && node != kNoNode) node = s->child(phase, node, frame);
    if (node == kNoNode) continue;
    if (n < max) out[n] = LaunchEntry{s, node, phase, /*named=*/true};
    ++n;
  }
  t.state = state.name;
  t.stateDetail = state.detail;
}

void SessionManager::popLaunchMetadata() {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.launchPending = false;
  if (!t.launchInFlight) discardTensors(t.launchTensors);
}

bool SessionManager::pendingLaunchMetadata(StringId &name, MetricList &metrics) {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  if (!t.launchPending) return false;
  name = t.launchName;
  metrics.assign(t.launchMetrics.begin(), t.launchMetrics.end());
  return true;
}

}  // namespace proton
