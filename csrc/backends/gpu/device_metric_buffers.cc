#include "backends/gpu/device_metric_buffers.h"

#include <algorithm>
#include <utility>

#include "backends/gpu/gpu_driver.h"
#include "core/clock.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::gpu {
namespace {

Counter &dropped() {
  static Counter &c = Stats::global().counter("tensor_metrics_dropped");
  return c;
}

// Values a flush left on the device for the next one (a capture kept their context from being
// synchronised): not lost, unless their session is finalized first (then counted in
// kernels_never_completed, as the device work it waited for).
Counter &readsPutOff() {
  static Counter &c = Stats::global().counter("tensor_metric_reads_put_off_for_captures");
  return c;
}

size_t aligned(size_t bytes) { return (bytes + 7) / 8 * 8; }

}  // namespace

DeviceMetricBuffers &DeviceMetricBuffers::global() {
  static DeviceMetricBuffers *buffers = new DeviceMetricBuffers();  // outlives exit handlers
  return *buffers;
}

void DeviceMetricBuffers::setDriver(const Driver *driver, std::function<void()> flush,
                                    std::function<Stream()> ownCapture) {
  std::lock_guard lock(mu_);
  driver_ = driver;
  flush_ = std::move(flush);
  ownCapture_ = std::move(ownCapture);
  capturedAt_ = StringTable::global().intern("<captured_at>");
  dropped();
  readsPutOff();
}

bool DeviceMetricBuffers::capturing(const DeviceTensor &tensor) {
  if (!driver_) return false;
  CaptureStatus status = CaptureStatus::kNone;
  // An error (e.g. the legacy stream while another stream is captured) counts as capturing:
  // an eager copy there would break the user's capture; recordCaptured then drops the value.
  if (driver_->streamIsCapturing(reinterpret_cast<Stream>(tensor.stream), &status) != kSuccess)
    return true;
  return status != CaptureStatus::kNone;
}

bool DeviceMetricBuffers::allocate(Context context, DevicePtr *out, size_t bytes, Stream *stream) {
  RelaxedCaptureMode relaxed(*driver_);  // legal even while this thread captures a graph
  bool ok = driver_->ctxPushCurrent(context) == kSuccess;
  if (ok) {
    ok = driver_->memAlloc(out, bytes) == kSuccess;
    if (ok && stream && driver_->streamCreate(stream, kStreamNonBlocking) != kSuccess) {
      driver_->memFree(*out);
      ok = false;
    }
    Context popped;
    driver_->ctxPopCurrent(&popped);
  }
  return ok;
}

bool DeviceMetricBuffers::enqueueCopy(Context context, DevicePtr dst, DevicePtr src, size_t bytes,
                                      Stream stream, bool filed) {
  if (driver_->ctxPushCurrent(context) != kSuccess) return false;
  bool ok = filed && driver_->copyKernelAsync &&
            driver_->copyKernelAsync(dst, src, bytes, stream) == kSuccess;
  if (!ok) ok = driver_->memcpyDtoDAsync(dst, src, bytes, stream) == kSuccess;
  Context popped;
  driver_->ctxPopCurrent(&popped);
  return ok;
}

DeviceMetricBuffers::Ring *DeviceMetricBuffers::ringFor(Context context, size_t *index) {
  for (size_t i = 0; i < rings_.size(); ++i) {
    if (rings_[i].context == context) {
      *index = i;
      return &rings_[i];
    }
  }
  Ring ring;
  ring.context = context;
  if (!allocate(context, &ring.base, kRingBytes, &ring.stream)) return nullptr;
  rings_.push_back(std::move(ring));
  *index = rings_.size() - 1;
  return &rings_.back();
}

bool DeviceMetricBuffers::takeSlot(Ring &ring, size_t bytes, size_t *offset) {
  if (ring.used + bytes > kRingBytes) return false;
  *offset = ring.used;
  ring.used += bytes;
  return true;
}

DeviceMetricSink::Handle DeviceMetricBuffers::copy(const DeviceTensor &tensor) {
  Context context = nullptr;
  size_t bytes = aligned(tensor.bytes());
  if (!driver_ || bytes > kRingBytes ||
      driver_->pointerGetContext(&context, tensor.dataPtr) != kSuccess) {
    dropped().add();
    return 0;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard lock(mu_);
      size_t index = 0, offset = 0;
      Ring *ring = ringFor(context, &index);
      if (!ring) break;
      if (takeSlot(*ring, bytes, &offset)) {
        if (!enqueueCopy(context, ring->base + offset, tensor.dataPtr, tensor.bytes(),
                         reinterpret_cast<Stream>(tensor.stream), /*filed=*/true))
          break;
        Handle handle = next_++;
        Record &r = records_[handle];
        r.tensor = tensor;
        r.ring = index;
        r.offset = offset;
        updatePending();
        return handle;
      }
    }
    if (attempt == 0 && flush_) flush_();  // every copy so far lands; the rings start over
  }
  dropped().add();
  return 0;
}

void DeviceMetricBuffers::bind(Handle handle, const MetricSpec &spec, const MetricTarget *targets,
                               size_t n) {
  std::lock_guard lock(mu_);
  auto it = records_.find(handle);
  if (it == records_.end()) return;
  Record &r = it->second;
  r.spec = spec;
  r.targets.assign(targets, targets + n);
  r.bound = true;
  for (const MetricTarget &t : r.targets) t.session->notePending(t.phase, 1);
  if (!r.onDevice) {  // read back by a drain since it was given
    file(r, r.host.data());
    records_.erase(it);
    updatePending();
  }
}

void DeviceMetricBuffers::updatePending() {
  size_t n = 0;
  for (const auto &[handle, r] : records_) n += r.onDevice ? 1 : 0;
  pending_.store(n, std::memory_order_relaxed);
}

void DeviceMetricBuffers::discard(Handle handle) {
  std::lock_guard lock(mu_);
  records_.erase(handle);
  updatePending();
}

void DeviceMetricBuffers::file(const Record &record, const uint8_t *bytes) {
  NamedMetric metric{record.spec, decodeTensorValue(bytes, record.tensor)};
  for (const MetricTarget &t : record.targets) {
    fileTensorValue(t, metric);
    t.session->notePending(t.phase, -1);
  }
}

void DeviceMetricBuffers::recordCaptured(const TensorMetric &metric, CaptureContext context,
                                         StringId sliceName) {
  Context owner = nullptr;  // of the tensor's memory
  Graph graph = nullptr;
  CaptureStatus status = CaptureStatus::kNone;
  Stream stream = reinterpret_cast<Stream>(metric.tensor.stream);
  size_t bytes = aligned(metric.tensor.bytes());
  if (!driver_ || !driver_->streamGetCaptureInfo || bytes > kArenaChunkBytes ||
      driver_->streamGetCaptureInfo(stream, &status, &graph) != kSuccess ||
      status != CaptureStatus::kActive || !graph ||
      driver_->pointerGetContext(&owner, metric.tensor.dataPtr) != kSuccess) {
    dropped().add();
    return;
  }
  std::lock_guard lock(mu_);
  size_t index = 0;
  Ring *ring = ringFor(owner, &index);
  if (ring && ring->arenaUsed + bytes > kArenaChunkBytes) {
    DevicePtr chunk = 0;
    if (allocate(owner, &chunk, kArenaChunkBytes)) {
      ring->arena.push_back(chunk);
      ring->arenaUsed = 0;
    }
  }
  if (!ring || ring->arenaUsed + bytes > kArenaChunkBytes) {
    dropped().add();
    return;
  }
  auto captured = std::make_shared<Captured>();
  captured->metric = metric;
  captured->context = std::move(context);
  captured->sliceName = sliceName;
  captured->ring = index;
  captured->slot = ring->arena.back() + ring->arenaUsed;
  // Captured, not run: the copy becomes a node of the graph (Proton's copy kernel, filed at
  // each replay under the capture's context, as it would be now).
  if (!enqueueCopy(owner, captured->slot, metric.tensor.dataPtr, metric.tensor.bytes(), stream,
                   /*filed=*/true)) {
    dropped().add();
    return;
  }
  ring->arenaUsed += bytes;
  captured_.add(graph, std::move(captured));
  anyCaptured_.store(true, std::memory_order_relaxed);
}

bool DeviceMetricBuffers::threadCapturing() {
  return driver_ && ownCapture_ && ownCapture_() != nullptr;
}

Graph DeviceMetricBuffers::capturingGraph(Stream stream) {
  Graph graph = nullptr;
  CaptureStatus status = CaptureStatus::kNone;
  if (!driver_ || !driver_->streamGetCaptureInfo ||
      driver_->streamGetCaptureInfo(stream, &status, &graph) != kSuccess ||
      status != CaptureStatus::kActive)
    return nullptr;
  return graph;
}

void DeviceMetricBuffers::recordCapturedScalars(const MetricList &metrics, CaptureContext context,
                                                StringId sliceName) {
  if (metrics.empty()) return;
  Stream stream = ownCapture_ ? ownCapture_() : nullptr;
  std::lock_guard lock(mu_);
  Graph graph = stream ? capturingGraph(stream) : nullptr;
  if (!graph) {
    dropped().add(metrics.size());
    return;
  }
  auto captured = std::make_shared<Captured>();
  captured->scalars = metrics;
  captured->context = std::move(context);
  captured->sliceName = sliceName;
  captured_.add(graph, std::move(captured));
  anyCaptured_.store(true, std::memory_order_relaxed);
}

void DeviceMetricBuffers::fileScalars(const Captured &c, const LaunchEntry *entries, size_t n,
                                      uint64_t launchNs, uint64_t threadId) {
  for (size_t i = 0; i < n; ++i) {
    Session &s = *entries[i].session;
    if (!c.context.records(s.id())) continue;  // deactivated when the graph was captured
    PhaseId phase = entries[i].phase;
    NodeId node = s.child(phase, entries[i].node, capturedAt_);
    for (StringId name : c.context.names)
      if (node != kNoNode) node = s.child(phase, node, name);
    if (node == kNoNode) continue;
    Status status;
    if (s.options().data == DataKind::kTrace) {
      TraceEvent event;
      event.name = c.sliceName;
      event.context = node;
      event.lane = Lane{Lane::Kind::kCpuThread, 0, threadId};
      event.beginNs = event.endNs = launchNs;
      status = s.addEvent(phase, event, c.scalars);
    } else {
      status = s.addMetrics(phase, node, c.scalars);
    }
    if (!status.isOk()) dropConflictingMetrics(status, c.sliceName);
  }
}

void DeviceMetricBuffers::onGraphCloned(Graph clone, Graph original) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.cloned(clone, original);
}

void DeviceMetricBuffers::onGraphExecCreated(GraphExec exec, Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execCreated(exec, graph);
}

void DeviceMetricBuffers::onGraphExecDestroyed(GraphExec exec) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execDestroyed(exec);
}

void DeviceMetricBuffers::onGraphExecUpdated(GraphExec exec, Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execUpdated(exec, graph);
}

uint64_t DeviceMetricBuffers::replayKey(GraphExec exec) const {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return 0;
  std::lock_guard lock(mu_);
  const GraphTies<Captured>::List *captured = captured_.ofExec(exec);
  if (captured)
    for (const auto &c : *captured)
      if (c->slot) return c->slot;  // scalar metrics have none: nothing of theirs is copied
  return 0;
}

void DeviceMetricBuffers::onGraphDestroyed(Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.destroyed(graph);
}

void DeviceMetricBuffers::onGraphLaunched(GraphExec exec, Stream stream, const LaunchEntry *entries,
                                          size_t n, uint64_t launchNs, uint64_t threadId) {
  if (!anyCaptured_.load(std::memory_order_relaxed) || n == 0) return;
  std::lock_guard lock(mu_);
  const GraphTies<Captured>::List *captured = captured_.ofExec(exec);
  if (!captured) return;
  if (!launchNs) launchNs = monotonicNs();
  for (const auto &c : *captured) {
    if (!c->scalars.empty()) {
      fileScalars(*c, entries, n, launchNs, threadId);
      continue;
    }
    Record r;
    r.tensor = c->metric.tensor;
    r.spec = c->metric.spec;
    r.bound = true;
    MetricList types{{c->metric.spec, placeholderValue(c->metric.tensor)}};
    for (size_t i = 0; i < n; ++i) {
      Session &s = *entries[i].session;
      if (!c->context.records(s.id())) continue;  // deactivated when the graph was captured
      PhaseId phase = entries[i].phase;
      NodeId node = s.child(phase, entries[i].node, capturedAt_);
      for (StringId name : c->context.names)
        if (node != kNoNode) node = s.child(phase, node, name);
      if (node == kNoNode || !s.declareMetricTypes(types).isOk()) continue;
      MetricTarget target{&s, phase, node};
      if (s.options().data == DataKind::kTrace) {
        target.kind = MetricTarget::Kind::kNewEvent;
        target.eventName = c->sliceName;
        target.thread = threadId;
        target.timeNs = launchNs;
      }
      r.targets.push_back(target);
    }
    if (r.targets.empty()) continue;  // nobody records this replay: nothing is copied
    Ring &ring = rings_[c->ring];
    size_t bytes = aligned(r.tensor.bytes());
    if (!takeSlot(ring, bytes, &r.offset) ||
        !enqueueCopy(ring.context, ring.base + r.offset, c->slot, r.tensor.bytes(), stream,
                     /*filed=*/false)) {  // the replay's copy node was the one filed
      dropped().add();                    // no flush from inside a launch callback
      continue;
    }
    r.ring = c->ring;
    for (const MetricTarget &t : r.targets) t.session->notePending(t.phase, 1);
    records_.emplace(next_++, std::move(r));
  }
  updatePending();
}

void DeviceMetricBuffers::beforeSync() {
  std::lock_guard lock(mu_);
  for (Ring &ring : rings_) ring.settled = ring.used;
}

std::vector<Context> DeviceMetricBuffers::contexts() const {
  std::lock_guard lock(mu_);
  std::vector<Context> out;
  for (const Ring &ring : rings_)
    if (ring.context) out.push_back(ring.context);
  return out;
}

bool DeviceMetricBuffers::readRing(size_t i, size_t upTo) {
  const Ring &ring = rings_[i];
  // From the lowest value still on the device: the part below was read by an earlier drain.
  size_t from = upTo;
  for (const auto &[handle, r] : records_)
    if (r.onDevice && r.ring == i && r.offset < from) from = r.offset;
  std::vector<uint8_t> host(upTo > from ? upTo - from : 0);
  bool copied = host.empty();
  if (!copied) {
    ContextScope scope(*driver_, ring.context, /*current=*/false);
    copied = scope.ok() &&
             driver_->memcpyDtoHAsync(host.data(), ring.base + from, host.size(), ring.stream) ==
                 kSuccess &&
             driver_->streamSynchronize(ring.stream) == kSuccess;
  }
  bool left = false;  // values given past upTo: a later drain's
  for (auto it = records_.begin(); it != records_.end();) {
    Record &r = it->second;
    if (!r.onDevice || r.ring != i || r.offset >= upTo) {
      left |= r.onDevice && r.ring == i;
      ++it;
      continue;
    }
    const uint8_t *value = host.data() + (r.offset - from);
    if (!copied) {
      dropped().add();
      for (const MetricTarget &t : r.targets) t.session->notePending(t.phase, -1);
      it = records_.erase(it);
    } else if (r.bound) {
      file(r, value);
      it = records_.erase(it);
    } else {
      // Given, not yet bound (a trace scope still open): keep the value on the host.
      r.host.assign(value, value + r.tensor.bytes());
      r.onDevice = false;
      ++it;
    }
  }
  return !left;
}

void DeviceMetricBuffers::drain(const std::vector<Context> &synced) {
  std::lock_guard lock(mu_);
  if (!driver_) return;
  RelaxedCaptureMode relaxed(*driver_);  // legal while this thread, or another, captures
  for (size_t i = 0; i < rings_.size(); ++i) {
    Ring &ring = rings_[i];
    const size_t settled = std::exchange(ring.settled, 0);
    if (settled == 0) continue;
    if (std::find(synced.begin(), synced.end(), ring.context) == synced.end()) {
      for (const auto &[handle, r] : records_)
        if (r.onDevice && r.ring == i && r.offset < settled) readsPutOff().add();
      continue;
    }
    if (readRing(i, settled)) ring.used = 0;
  }
  updatePending();
}

void DeviceMetricBuffers::onContextDestroying(Context context) {
  std::lock_guard lock(mu_);
  if (!driver_) return;
  for (size_t i = 0; i < rings_.size(); ++i) {
    if (rings_[i].context != context) continue;
    RelaxedCaptureMode relaxed(*driver_);
    if (rings_[i].used) {
      ContextScope scope(*driver_, context, /*current=*/false);
      if (scope.ok()) driver_->ctxSynchronize();  // its copies so far (it is going anyway)
    }
    readRing(i, rings_[i].used);  // what cannot be read is dropped, counted
    rings_[i] = Ring{};           // its memory and stream went with the context
    updatePending();
  }
}

}  // namespace proton::gpu
