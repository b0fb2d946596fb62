// The session manager's scope and state calls: entering and exiting scopes in every live
// session the calling thread records into, with their metrics (tensor metrics copied on the
// giving stream), and the state tag.

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/gpu_backend.h"
#include "context/shadow_context.h"
#include "core/clock.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"
#include "runtime/session_manager_internal.h"

namespace proton {
using namespace detail;

namespace {

// Scalar metrics plus a zero of each tensor metric's type, for type checks.
MetricList withPlaceholders(const MetricList *metrics, const std::vector<TensorMetric> *tensors) {
  MetricList all;
  if (metrics) all = *metrics;
  if (tensors)
    for (const TensorMetric &m : *tensors) all.push_back({m.spec, placeholderValue(m.tensor)});
  return all;
}

void discardAll(SessionManager::TensorCopies &copies) {
  discardTensors(copies.tree);
  discardTensors(copies.trace);
}

// Binds each copy to the targets of its metric (none: the copy is dropped).
void bindTensors(std::vector<PendingTensor> &copies, const MetricTarget *targets, size_t n) {
  DeviceMetricSink *sink = deviceMetricSink();
  for (PendingTensor &p : copies) {
    if (!p.handle || !sink) continue;
    if (n > 0) {
      sink->bind(p.handle, p.metric.spec, targets, n);
    } else {
      sink->discard(p.handle);
    }
    p.handle = 0;
  }
}

}  // namespace

void SessionManager::copyTensors(const std::vector<TensorMetric> *tensors, TensorCopies &out,
                                 StringId entering) {
  DeviceMetricSink *sink = deviceMetricSink();
  if (!tensors || tensors->empty() || !sink) return;
  MetricCopyPlacement placement(entering, StringId{});
  bool tree = false, trace = false;
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!s || !s->active()) continue;
    (s->options().data == DataKind::kTrace ? trace : tree) = true;
  }
  for (const TensorMetric &m : *tensors) {
    if (sink->capturing(m.tensor)) {
      out.captured.push_back(&m);
      continue;
    }
    if (tree) out.tree.push_back({m, sink->copy(m.tensor)});
    if (trace) out.trace.push_back({m, sink->copy(m.tensor)});
  }
}

void SessionManager::captureContextLocked(const ThreadContext &t, const PythonStack *stack,
                                          CaptureContext &out) {
  out.names.clear();
  appendContextNames(t, stack, out.names);
  if (t.state != StringId{}) out.names.push_back(t.state);
  if (t.stateDetail != StringId{}) out.names.push_back(t.stateDetail);
  out.notRecording.clear();
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (s && !s->active()) out.notRecording.push_back(s->id());
  }
}

Status SessionManager::enterScope(StringId name, bool timed,
                                  std::shared_ptr<const MetricList> metrics, uint64_t *scopeId,
                                  const std::vector<TensorMetric> *tensors) {
  if (!profilingOn()) return {};
  const PythonStack *stack = captureStack();
  if (!stack) stack = emptyPythonStack();
  DeviceMetricSink *sink = deviceMetricSink();
  // Given while this thread captures a CUDA graph: the metrics belong to every replay of the
  // graph (under <captured_at>), not to the capture, as triton.profiler files them.
  const bool replayed = metrics && !metrics->empty() && sink && sink->threadCapturing();
  if (replayed) PROTON_RETURN_IF_ERROR(checkLiveMetricTypes(*metrics));
  TensorCopies copies;
  copyTensors(tensors, copies, name);  // before the thread's lock: a copy may wait for a flush
  CaptureContext captured;
  bool hasTensors = tensors && !tensors->empty();
  MetricTarget treeTargets[kMaxLiveSessions];
  size_t numTree = 0;
  {
    ThreadContext &t = ThreadContext::current();
    std::lock_guard guard(t.lock);
    t.resetIfStale(generation());
    stack = withBorrowedStack(t, stack);
    Status status = enterScopeLocked(t, stack, name, timed, replayed ? nullptr : metrics, scopeId,
                                     tensors, treeTargets, numTree, copies);
    if (!status.isOk()) {
      discardAll(copies);
      return status;
    }
    if (replayed || !copies.captured.empty())
      captureContextLocked(t, stackLive() ? stack : nullptr, captured);
  }
  bindTensors(copies.tree, treeTargets, numTree);
  if (sink && hasTensors && !copies.captured.empty()) {
    MetricCopyPlacement placement(StringId{}, StringId{});  // the scope is open now
    for (const TensorMetric *m : copies.captured) sink->recordCaptured(*m, captured, name);
  }
  if (replayed) sink->recordCapturedScalars(*metrics, std::move(captured), name);
  return {};
}

Status SessionManager::checkLiveMetricTypes(const MetricList &metrics) {
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (s && s->active()) PROTON_RETURN_IF_ERROR(s->checkMetricTypes(metrics));
  }
  return {};
}

Status SessionManager::enterScopeLocked(ThreadContext &t, const PythonStack *stack, StringId name,
                                        bool timed,
                                        const std::shared_ptr<const MetricList> &metrics,
                                        uint64_t *scopeId, const std::vector<TensorMetric> *tensors,
                                        MetricTarget *treeTargets, size_t &numTree,
                                        TensorCopies &copies) {
  bool hasMetrics = metrics && !metrics->empty();
  bool hasTensors = tensors && !tensors->empty();
  if (hasMetrics || hasTensors)
    PROTON_RETURN_IF_ERROR(checkLiveMetricTypes(withPlaceholders(metrics.get(), tensors)));
  uint32_t depth = static_cast<uint32_t>(t.frames.size());
  uint64_t id = (t.threadId << 32) | (++t.scopeCounter & 0xffffffffu);
  if (scopeId) *scopeId = id;
  // The clock is read only when something will use the time: cpu_timed_scope or trace data.
  uint64_t beginNs = timed || traceLive_.load(std::memory_order_relaxed) ? monotonicNs() : 0;
  t.frames.push_back(ScopeFrame{name, beginNs, timed, metrics, id});
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!s || !s->active()) continue;
    NodeId parent = refreshMirror(*s, t);
    SessionMirror &m = t.mirror(s->id());
    MirrorEntry entry{depth, name, kNoNode};
    entry.pathHash = chainHash(m.entries.empty() ? 0 : m.entries.back().pathHash, name);
    entry.spliceDepth = scopeSpliceDepth(*s, stack);
    if (entry.spliceDepth >= 0) entry.pathHash ^= uint64_t(uint32_t(entry.spliceDepth + 1)) << 33;
    if (usesCallStack(*s)) {
      // ROOT/<frames now>/<open scopes>/<this scope>.
      entry.stack = stack;
      entry.node = resolvePythonPath(*s, m.phase, stack, m.entries.data(), m.entries.size(), name);
    } else {
      entry.node = mirroredChild(*s, m, parent, name);
    }
    NodeId node = entry.node;
    if (node == kNoNode) continue;
    m.entries.push_back(entry);
    if ((hasMetrics || hasTensors) && s->options().data == DataKind::kTree) {
      NodeId target = underState(*s, m.phase, node, t);
      // Types were checked above; another thread may have set a conflicting type since.
      if (hasMetrics)
        if (Status st = s->addMetrics(m.phase, target, *metrics); !st.isOk())
          dropConflictingMetrics(st, name);
      if (hasTensors && target != kNoNode) {
        if (Status st = s->declareMetricTypes(withPlaceholders(nullptr, tensors)); !st.isOk())
          dropConflictingMetrics(st, name);
        treeTargets[numTree++] = MetricTarget{s, m.phase, target};
      }
    }
  }
  if (!copies.trace.empty()) {
    t.frames.back().entryTensors =
        std::make_shared<std::vector<PendingTensor>>(std::move(copies.trace));
    copies.trace.clear();
  }
  return {};
}

Status SessionManager::exitScope(std::optional<StringId> name, const MetricList &metrics,
                                 uint64_t *scopeId, const std::vector<TensorMetric> *tensors) {
  if (!profilingOn()) return {};
  DeviceMetricSink *sink = deviceMetricSink();
  // Given while this thread captures a CUDA graph: for the graph's replays (see enterScope).
  const bool replayed = !metrics.empty() && sink && sink->threadCapturing();
  TensorCopies copies;
  copyTensors(tensors, copies);  // before the thread's lock: a copy may wait for a flush
  const PythonStack *stack = replayed || !copies.captured.empty() ? captureStack() : nullptr;
  CaptureContext captured;
  StringId scopeName;
  MetricTarget treeTargets[kMaxLiveSessions], traceTargets[kMaxLiveSessions];
  size_t numTree = 0, numTrace = 0;
  std::shared_ptr<std::vector<PendingTensor>> entryTensors;
  {
    ThreadContext &t = ThreadContext::current();
    std::lock_guard guard(t.lock);
    t.resetIfStale(generation());
    if (stack) stack = withBorrowedStack(t, stack);
    if (!t.frames.empty()) entryTensors = t.frames.back().entryTensors;
    Status status = checkScopeExit(t, name, metrics, tensors);
    if (!status.isOk()) {
      discardAll(copies);
      return status;
    }
    scopeName = t.frames.back().name;
    // Frames of the capture include the scope being exited.
    if (replayed || !copies.captured.empty()) captureContextLocked(t, stack, captured);
    exitScopeLocked(t, replayed ? MetricList{} : metrics, tensors, scopeId, treeTargets, numTree,
                    traceTargets, numTrace);
  }
  bindTensors(copies.tree, treeTargets, numTree);
  bindTensors(copies.trace, traceTargets, numTrace);
  if (entryTensors) bindTensors(*entryTensors, traceTargets, numTrace);
  if (sink && !copies.captured.empty()) {
    MetricCopyPlacement placement(scopeName, StringId{});  // closed now: its copy goes under it
    for (const TensorMetric *m : copies.captured) sink->recordCaptured(*m, captured, scopeName);
  }
  if (replayed) sink->recordCapturedScalars(metrics, std::move(captured), scopeName);
  return {};
}

Status SessionManager::checkScopeExit(ThreadContext &t, std::optional<StringId> name,
                                      const MetricList &metrics,
                                      const std::vector<TensorMetric> *tensors) {
  const StringTable &strings = StringTable::global();
  if (t.frames.empty()) {
    return {StatusCode::kScopeMismatch,
            "[PROTON] exit_scope(" + (name ? "'" + std::string(strings.view(*name)) + "'" : "") +
                ") called with no open scope"};
  }
  const ScopeFrame &top = t.frames.back();
  if (name && *name != top.name) {
    return {StatusCode::kScopeMismatch,
            "[PROTON] Scope name mismatch: exit_scope('" + std::string(strings.view(*name)) +
                "') but the innermost open scope is '" + std::string(strings.view(top.name)) + "'"};
  }
  if (metrics.empty() && (!tensors || tensors->empty())) return {};
  // Trace events carry the entry metrics too, so those are checked together with these.
  MetricList exit = withPlaceholders(&metrics, tensors);
  MetricList withEntry;
  if (top.metrics) withEntry = *top.metrics;
  if (top.entryTensors)
    for (const PendingTensor &p : *top.entryTensors)
      withEntry.push_back({p.metric.spec, placeholderValue(p.metric.tensor)});
  withEntry.insert(withEntry.end(), exit.begin(), exit.end());
  uint32_t depth = static_cast<uint32_t>(t.frames.size() - 1);
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!recordedAt(t, s, depth) || !s->active()) continue;
    bool trace = s->options().data == DataKind::kTrace;
    PROTON_RETURN_IF_ERROR(s->checkMetricTypes(trace ? withEntry : exit));
  }
  return {};
}

bool SessionManager::recordedAt(const ThreadContext &t, Session *s, uint32_t depth) {
  if (!s || static_cast<size_t>(s->id().value) >= t.mirrors.size()) return false;
  const SessionMirror &m = t.mirrors[s->id().value];
  return !m.entries.empty() && m.entries.back().depth == depth;
}

void SessionManager::exitScopeLocked(ThreadContext &t, const MetricList &metrics,
                                     const std::vector<TensorMetric> *tensors, uint64_t *scopeId,
                                     MetricTarget *treeTargets, size_t &numTree,
                                     MetricTarget *traceTargets, size_t &numTrace) {
  // A reference: nothing below pushes or pops a frame before the pop at the end (a copy of
  // the frame, with its two shared pointers, stalled on store forwarding per operator).
  const ScopeFrame &top = t.frames.back();
  uint32_t depth = static_cast<uint32_t>(t.frames.size() - 1);
  bool hasTensors = (tensors && !tensors->empty()) || top.entryTensors;
  uint64_t endNs = top.beginNs ? monotonicNs() : 0;
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!recordedAt(t, s, depth)) continue;
    SessionMirror &m = t.mirror(s->id());
    if (s->active()) {
      NodeId node = refreshMirror(*s, t);
      MetricList all;
      bool trace = s->options().data == DataKind::kTrace;
      if (trace && top.metrics) all = *top.metrics;
      all.insert(all.end(), metrics.begin(), metrics.end());
      if (top.timed) {
        static const MetricSpec kCpuTime{StringTable::global().intern("cpu_time (ns)"),
                                         MetricAggregation::kExclusive};
        all.push_back({kCpuTime, static_cast<int64_t>(endNs - top.beginNs)});
      }
      if (hasTensors)
        if (Status st = s->declareMetricTypes(withPlaceholders(nullptr, tensors)); !st.isOk())
          dropConflictingMetrics(st, top.name);
      if (trace) {
        TraceEvent event;
        event.name = top.name;
        event.context = node;
        event.lane = Lane{Lane::Kind::kCpuThread, 0, t.threadId};
        event.beginNs = top.beginNs;
        event.endNs = endNs;
        uint32_t index = UINT32_MAX;
        if (Status st = s->addEvent(m.phase, event, all, &index); !st.isOk())
          dropConflictingMetrics(st, top.name);
        if (hasTensors && index != UINT32_MAX) {
          MetricTarget target{s, m.phase, node, MetricTarget::Kind::kEvent};
          target.event = index;
          traceTargets[numTrace++] = target;
        }
      } else if (!all.empty() || hasTensors) {  // the state's child exists only if used
        NodeId target = underState(*s, m.phase, node, t);
        if (!all.empty())
          if (Status st = s->addMetrics(m.phase, target, all); !st.isOk())
            dropConflictingMetrics(st, top.name);
        if (hasTensors && target != kNoNode) treeTargets[numTree++] = {s, m.phase, target};
      }
    }
    m.entries.pop_back();
  }
  if (scopeId) *scopeId = top.id;
  t.frames.pop_back();
}

void SessionManager::enterState(StringId name) {
  if (!profilingOn()) return;
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  t.state = name;
  t.stateDetail = StringId{};
}

void SessionManager::exitState() {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  t.state = StringId{};
  t.stateDetail = StringId{};
}

SessionManager::MetricCopyPlacement::MetricCopyPlacement(StringId scope, StringId kernel) {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.metricCopy = true;
  t.metricCopyScope = scope;
  t.metricCopyKernel = kernel;
}

SessionManager::MetricCopyPlacement::~MetricCopyPlacement() {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.metricCopy = false;
  t.metricCopyScope = t.metricCopyKernel = StringId{};
}

StateTag SessionManager::exchangeState(StateTag tag) {
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  StateTag previous{t.state, t.stateDetail};
  t.state = tag.name;
  t.stateDetail = tag.name == StringId{} ? StringId{} : tag.detail;
  return previous;
}

}  // namespace proton
