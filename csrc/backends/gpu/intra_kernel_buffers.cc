#include "backends/gpu/intra_kernel_buffers.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/kernel_attributor.h"
#include "core/clock.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::gpu {
namespace {

constexpr size_t kAlign = 256;
// Launches per ring between drains.
constexpr size_t kMaxSlots = 65536;
// The graph arena beside each ring: CUDA graph slots, never reused (a graph may replay any
// time while the process lives).
constexpr size_t kGraphArenaDivisor = 8;

struct Pending {
  bool valid = false;
  size_t ring = 0;
  size_t offset = 0;
  size_t bytes = 0;
  bool trace = false;
  Graph captureGraph = nullptr;  // a slot in the graph arena: the launch is captured into it
  size_t tooLarge = 0;           // not valid: the launch's buffer would exceed the ring (bytes)
  size_t ringBytes = 0;
  uint64_t ticket = 0;  // an eager slot's, in its ring's inFlight
};
thread_local Pending tlsPending;
// The eager slot tied to this thread's launch in progress, in flight until its call returns.
struct Bound {
  bool valid = false;
  size_t ring = 0;
  uint64_t ticket = 0;
  uint64_t correlation = 0;  // of the launch it is tied to
};
thread_local Bound tlsBound;
// A thread that ends holding a slot (handed out for a launch that never came): not in flight.
struct SlotsAtThreadEnd {
  ~SlotsAtThreadEnd() {
    if (owner) owner->forgetThreadsSlots();
  }
  IntraKernelBuffers *owner = nullptr;  // the buffers (the global ones) it holds a slot of
};
thread_local SlotsAtThreadEnd tlsSlotsAtEnd;

Counter &stat(const char *name) { return Stats::global().counter(name); }

// Zeroes new device memory on the ring's own stream, created non-blocking: the legacy stream
// would wait for every blocking stream, and break a capture under way on one.
bool zeroed(const Driver &driver, Stream stream, DevicePtr at, size_t bytes) {
  return driver.memsetD8Async(at, 0, bytes, stream) == kSuccess &&
         driver.streamSynchronize(stream) == kSuccess;
}

}  // namespace

IntraKernelBuffers &IntraKernelBuffers::global() {
  static IntraKernelBuffers *buffers = new IntraKernelBuffers();  // outlives exit handlers
  return *buffers;
}

void IntraKernelBuffers::addUser() {
  std::lock_guard lock(mu_);
  if (users_ == 0) {  // the cap is each trace's, not the process's
    filer_.waitIdle();
    std::lock_guard decoding(decoderMu_);
    decoder_.startAnew();
    reservedSlices_ = 0;
  }
  if (users_++ == 0)
    for (const char *name :
         {"instrumentation_launches_unrecorded", "instrumentation_graph_launches_unrecorded",
          "instrumentation_ring_drains", "instrumentation_launches_past_trace_cap",
          "instrumentation_ring_full_wait_us", "instrumentation_trace_decode_us",
          "instrumentation_tree_reduced_on_host", "instrumentation_graph_replays_merged",
          "instrumentation_drains_waiting_for_context",
          "instrumentation_drains_put_off_for_captures"})
      stat(name);
}

void IntraKernelBuffers::removeUser() {
  std::lock_guard lock(mu_);
  if (users_ > 0 && --users_ == 0) {
    // Launches left past their sessions' last flush (its drain put off for a capture under
    // way, or still in their launch call then) are filed later into sessions that ended: lost.
    // Counted here, once: their entries go, so that filing them later counts nothing more.
    for (Ring &ring : rings_) {
      if (size_t n = wanted(ring.slots)) stat("instrumentation_launches_unrecorded").add(n);
      for (SlotRecord &slot : ring.slots) slot.numEntries = 0;
    }
    // No callback tells of these streams' captures or ends until the next session.
    for (Ring &ring : rings_) {
      if (ring.streams.empty()) continue;
      ring.streams.clear();
      ring.waitContext = true;
    }
  }
}

void IntraKernelBuffers::cancelLaunch(uint64_t correlation) {
  std::lock_guard lock(mu_);
  byCorrelation_.erase(correlation);
}

bool IntraKernelBuffers::inUse() const {
  std::lock_guard lock(mu_);
  return users_ > 0;
}

void IntraKernelBuffers::setLimits(uint64_t ringBytes, uint64_t maxTraceEvents,
                                   uint32_t traceCapacity) {
  std::lock_guard lock(mu_);
  traceUnitBytes_ = instrumentation::kTraceUnitHeaderBytes + 8 * traceCapacity;
  if (ringBytes) ringBytes_ = ringBytes;
  if (maxTraceEvents) {
    std::lock_guard decoding(decoderMu_);
    decoder_.setMaxTraceEvents(maxTraceEvents);
  }
}

Context IntraKernelBuffers::launchContext(const Driver &driver, uint64_t stream) {
  // kLegacyStream (1) and kPerThreadStream (2) are handles, not streams: they run in
  // whatever context is current at the launch.
  Context context = nullptr;
  if (stream > 2 && driver.streamGetCtx(reinterpret_cast<Stream>(stream), &context) == kSuccess &&
      context)
    return context;
  if (!primary_) {
    Device device = 0;
    if (driver.deviceGet(&device, 0) != kSuccess ||
        driver.devicePrimaryCtxRetain(&primary_, device) != kSuccess)
      primary_ = nullptr;
  }
  return primary_;
}

IntraKernelBuffers::Ring *IntraKernelBuffers::ringFor(const Driver &driver, Context context) {
  if (Ring *known = existingRing(context)) return known;
  Ring ring;
  ring.context = context;
  ring.capacity = ringBytes_;
  Device device = 0;
  if (driver.ctxGetDevice(&device) != kSuccess) return nullptr;
  ring.device = static_cast<int>(device);
  int khz = 0;
  if (driver.deviceClockRateKhz(&khz, device) == kSuccess) ring.cyclesPerNs = khz / 1e6;
  // The process's first instrumented launch on this GPU may be one being captured into a CUDA
  // graph: nothing here may touch a stream that captures, or make the capture illegal.
  RelaxedCaptureMode relaxed(driver);
  if (driver.memAlloc(&ring.base, ring.capacity) != kSuccess) {
    if (std::exchange(allocationFailureSaid_, true)) return nullptr;  // said once; retried
    std::fprintf(stderr,
                 "[PROTON] could not allocate %zu MB of GPU memory for intra-kernel buffers; "
                 "kernels run without recording (stat instrumentation_launches_unrecorded). "
                 "PROTON_INSTRUMENTATION_RING_MB sets a smaller size.\n",
                 ring.capacity >> 20);
    return nullptr;
  }
  // The ring's own stream is never destroyed (destroying it here would call back into
  // onStreamRetiring, under mu_): one made for a ring that could not be set up is kept for the
  // context's next try.
  auto kept = std::find_if(spareStreams_.begin(), spareStreams_.end(),
                           [&](const auto &spare) { return spare.first == context; });
  if (kept != spareStreams_.end()) {
    ring.ownStream = kept->second;
    spareStreams_.erase(kept);
  } else if (driver.streamCreate(&ring.ownStream, kStreamNonBlocking) != kSuccess) {
    driver.memFree(ring.base);  // not kept: the next launch tries again
    return nullptr;
  }
  if (!zeroed(driver, ring.ownStream, ring.base, ring.capacity)) {
    driver.memFree(ring.base);
    spareStreams_.emplace_back(context, ring.ownStream);
    return nullptr;
  }
  ring.streams.reserve(kWaitStreams);
  ring.inFlight.reserve(kWaitStreams);
  // The graph arena is allocated with the ring. Without one, launches being captured run
  // unrecorded (counted).
  size_t arena = ring.capacity / kGraphArenaDivisor;
  if (driver.memAlloc(&ring.graphBase, arena) == kSuccess) {
    if (zeroed(driver, ring.ownStream, ring.graphBase, arena))
      ring.graphCapacity = arena;
    else
      driver.memFree(ring.graphBase), ring.graphBase = 0;
  } else {
    ring.graphBase = 0;
  }
  rings_.push_back(std::move(ring));
  return &rings_.back();
}

IntraKernelBuffers::Ring *IntraKernelBuffers::existingRing(Context context) {
  for (Ring &r : rings_)
    if (r.context == context) return &r;
  return nullptr;
}

IntraKernelBuffers::Alloc IntraKernelBuffers::allocateGraphSlot(const Driver &driver, size_t bytes,
                                                                bool trace, uint64_t stream,
                                                                uint64_t *devicePtr) {
  Context current = nullptr;
  if (driver.ctxGetCurrent(&current) != kSuccess) current = nullptr;
  Context context = current ? current : launchContext(driver, stream);
  // The GPU's first instrumented launch may be this one: a tree's ring and arena are allocated
  // now. A trace replay's slices are placed with the offset between kernel records and
  // %globaltimer that an eager launch showed; with no eager launch yet, none (counted below).
  Ring *ring = context ? existingRing(context) : nullptr;
  if (!ring && context && !trace) {
    ContextScope scope(driver, context, context == current);
    if (scope.ok()) ring = ringFor(driver, context);
  }
  size_t raw = trace ? bytes : bytes + instrumentation::kTreeHeaderBytes;
  size_t need = (raw + kAlign - 1) / kAlign * kAlign;
  Graph graph = nullptr;
  CaptureStatus status = CaptureStatus::kNone;
  if (!ring || ring->graphUsed + need > ring->graphCapacity || !driver.streamGetCaptureInfo ||
      driver.streamGetCaptureInfo(reinterpret_cast<Stream>(stream), &status, &graph) != kSuccess ||
      status != CaptureStatus::kActive || !graph) {
    stat("instrumentation_graph_launches_unrecorded").add();
    return Alloc::kOff;
  }
  tlsPending =
      Pending{true, static_cast<size_t>(ring - rings_.data()), ring->graphUsed, need, trace};
  tlsPending.captureGraph = graph;
  *devicePtr = ring->graphBase + ring->graphUsed;
  ring->graphUsed += need;
  return Alloc::kOk;
}

IntraKernelBuffers::Alloc IntraKernelBuffers::allocate(const Driver &driver, size_t bytes,
                                                       bool trace, uint64_t stream,
                                                       uint64_t *devicePtr) {
  *devicePtr = 0;
  forgetThreadsSlots();
  // An empty grid (Triton's launcher asks for grid x bytes per CTA, then skips the launch):
  // no slot. A slot of no bytes would protect nothing, yet hold its offset as in flight.
  if (bytes == 0) return Alloc::kOff;
  CaptureStatus capture = CaptureStatus::kNone;
  if (driver.streamIsCapturing(reinterpret_cast<Stream>(stream), &capture) == kSuccess &&
      capture != CaptureStatus::kNone) {
    std::lock_guard lock(mu_);
    if (users_ == 0) {
      stat("instrumentation_graph_launches_unrecorded").add();
      return Alloc::kOff;
    }
    return allocateGraphSlot(driver, bytes, trace, stream, devicePtr);
  }
  Context current = nullptr;
  if (driver.ctxGetCurrent(&current) != kSuccess) current = nullptr;
  std::lock_guard lock(mu_);
  if (users_ == 0) return Alloc::kOff;
  if (trace && traceCapReached()) {
    // The trace reached its size cap: later launches run without recording (and cost
    // nothing more than the kernel).
    stat("instrumentation_launches_past_trace_cap").add();
    return Alloc::kOff;
  }
  Context context = current ? current : launchContext(driver, stream);
  Ring *ring = nullptr;
  if (context) {
    ContextScope scope(driver, context, context == current);
    if (scope.ok()) ring = ringFor(driver, context);
    // Load (and, the first time on this machine, JIT-compile) the reduction now, at the
    // first instrumented launch, rather than inside a drain in the middle of the user's loop.
    if (ring && !trace) loadReduce(driver, *ring);
  }
  // A tree slot starts with a 16-byte header that Triton's size does not include.
  size_t raw = trace ? bytes : bytes + instrumentation::kTreeHeaderBytes;
  size_t need = (raw + kAlign - 1) / kAlign * kAlign;
  if (!ring || need > ring->capacity) {
    stat("instrumentation_launches_unrecorded").add();
    if (ring) {  // said with the kernel's name at its launch
      tlsPending.tooLarge = need;
      tlsPending.ringBytes = ring->capacity;
      tlsPending.trace = trace;
    }
    return Alloc::kOff;
  }
  size_t at = ring->slots.size() < kMaxSlots ? fit(*ring, need) : kNoRoom;
  if (at == kNoRoom) return Alloc::kFull;
  take(*ring, at, need);
  tlsPending = Pending{true, static_cast<size_t>(ring - rings_.data()), at, need, trace};
  tlsPending.ticket = ++tickets_;
  tlsSlotsAtEnd.owner = this;  // it forgets the slot if the thread ends first
  ring->inFlight.push_back({tlsPending.ticket, at, need, stream});
  *devicePtr = ring->base + at;
  noteStream(*ring, stream);
  return Alloc::kOk;
}

size_t IntraKernelBuffers::fit(const Ring &ring, size_t bytes) {
  size_t at = ring.used;
  for (bool moved = true; moved;) {
    moved = false;
    for (const std::vector<InFlight> *around : {&ring.kept, &ring.pinned}) {
      for (const InFlight &k : *around) {
        if (at < k.offset + k.bytes && k.offset < at + bytes) {
          at = k.offset + k.bytes;
          moved = true;
        }
      }
    }
  }
  return at + bytes <= ring.capacity ? at : kNoRoom;
}

void IntraKernelBuffers::take(Ring &ring, size_t at, size_t bytes) {
  ring.used = at + bytes;
  ring.end = std::max(ring.end, ring.used);
}

void IntraKernelBuffers::release(size_t ring, uint64_t ticket) {
  if (ring >= rings_.size()) return;
  std::vector<InFlight> &inFlight = rings_[ring].inFlight;
  for (size_t i = 0; i < inFlight.size(); ++i) {
    if (inFlight[i].ticket != ticket) continue;
    inFlight[i] = inFlight.back();
    inFlight.pop_back();
    return;
  }
}

IntraKernelBuffers::~IntraKernelBuffers() {
  if (tlsSlotsAtEnd.owner == this) tlsSlotsAtEnd.owner = nullptr;
}

void IntraKernelBuffers::forgetThreadsSlots() {
  Pending stale = std::exchange(tlsPending, Pending{});
  if ((!stale.valid || !stale.ticket) && !tlsBound.valid) return;
  std::lock_guard lock(mu_);
  if (stale.valid && stale.ticket) release(stale.ring, stale.ticket);
  if (tlsBound.valid) release(tlsBound.ring, tlsBound.ticket);
  tlsBound.valid = false;
}

void IntraKernelBuffers::launchReturned(bool captured) {
  if (!tlsBound.valid) return;
  tlsBound.valid = false;
  std::lock_guard lock(mu_);
  if (captured && tlsBound.ring < rings_.size())
    pinCaptured(rings_[tlsBound.ring], tlsBound.ticket, tlsBound.correlation);
  release(tlsBound.ring, tlsBound.ticket);
}

void IntraKernelBuffers::pinCaptured(Ring &ring, uint64_t ticket, uint64_t correlation) {
  auto f = std::find_if(ring.inFlight.begin(), ring.inFlight.end(),
                        [&](const InFlight &i) { return i.ticket == ticket; });
  if (f == ring.inFlight.end()) return;
  ring.pinned.push_back(*f);
  stat("instrumentation_graph_launches_unrecorded").add();
  // Its slot record is filed in no session (its kernel never ran eagerly: the slot holds
  // zeros now, and whatever its replays add later).
  auto bound = byCorrelation_.find(correlation);
  if (bound == byCorrelation_.end()) return;
  ring.slots[bound->second.second].numEntries = 0;
  byCorrelation_.erase(bound);
}

void IntraKernelBuffers::noteStream(Ring &ring, uint64_t stream) {
  if (std::find(ring.streams.begin(), ring.streams.end(), stream) != ring.streams.end()) return;
  // The per-thread default stream is another one on the draining thread.
  if (reinterpret_cast<Stream>(stream) == kPerThreadStream || ring.streams.size() == kWaitStreams)
    ring.waitContext = true;
  else
    ring.streams.push_back(stream);
  anyStreams_.store(true, std::memory_order_relaxed);
}

void IntraKernelBuffers::onStreamRetiring(Stream stream, bool captureBegins) {
  if (isLegacyStream(stream) || !anyStreams_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  if (!driver_) return;
  RelaxedCaptureMode relaxed(*driver_);  // another thread may be capturing, in global mode
  // A capture on a blocking stream makes the legacy stream, which waits for it, unwaitable too.
  unsigned int flags = kStreamNonBlocking;
  bool legacyToo = captureBegins && driver_->streamGetFlags &&
                   driver_->streamGetFlags(stream, &flags) == kSuccess &&
                   !(flags & kStreamNonBlocking);
  Context current = nullptr;
  if (driver_->ctxGetCurrent(&current) != kSuccess) current = nullptr;
  for (Ring &ring : rings_) {
    markStream(ring, stream, current);
    if (legacyToo) {
      markStream(ring, nullptr, current);
      markStream(ring, kLegacyStream, current);
    }
  }
}

void IntraKernelBuffers::markStream(Ring &ring, Stream stream, Context current) {
  auto it = std::find(ring.streams.begin(), ring.streams.end(), reinterpret_cast<uint64_t>(stream));
  if (it == ring.streams.end()) return;
  ring.streams.erase(it);
  // A stream that joined a capture unseen: an event recorded on it now would go into the
  // program's graph. Only the context can be waited for then.
  if (streamCapturing(*driver_, stream)) {
    ring.waitContext = true;
    return;
  }
  // Recorded before the call: it follows the ring's launches on the stream.
  ContextScope scope(*driver_, ring.context, current == ring.context);
  Event mark = nullptr;
  if (!ring.spareMarks.empty()) {
    mark = ring.spareMarks.back();
    ring.spareMarks.pop_back();
  } else if (!scope.ok() || driver_->eventCreate(&mark, kEventDisableTiming) != kSuccess) {
    mark = nullptr;
  }
  if (mark && driver_->eventRecord(mark, stream) == kSuccess) {
    ring.marks.push_back(mark);
  } else {
    if (mark) ring.spareMarks.push_back(mark);
    ring.waitContext = true;
  }
}

void IntraKernelBuffers::bindLaunch(uint64_t correlation, const LaunchEntry *entries, size_t n,
                                    const char *symbol, StringId launchName) {
  if (!tlsPending.valid || tlsPending.captureGraph) {  // a capture's slot: bindCaptured takes it
    if (!tlsPending.valid && tlsPending.tooLarge)
      warnTooLarge(symbol, std::exchange(tlsPending.tooLarge, 0), tlsPending.ringBytes,
                   tlsPending.trace);
    return;
  }
  Pending p = tlsPending;
  tlsPending.valid = false;
  SlotRecord slot;
  slot.offset = p.offset;
  slot.bytes = p.bytes;
  slot.trace = p.trace;
  slot.symbol = StringTable::global().intern(symbol ? symbol : "");
  slot.launchName = launchName;
  slot.numEntries = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
  for (uint32_t i = 0; i < slot.numEntries; ++i) slot.entries[i] = entries[i];
  std::lock_guard lock(mu_);
  if (p.ring >= rings_.size()) return;
  if (!rings_[p.ring].context) {  // its context was destroyed since the slot was handed out
    stat("instrumentation_launches_unrecorded").add();
    return;
  }
  tlsBound = Bound{true, p.ring, p.ticket, correlation};
  rings_[p.ring].slots.push_back(slot);
  byCorrelation_[correlation] = {p.ring, rings_[p.ring].slots.size() - 1};
}

void IntraKernelBuffers::warnTooLarge(const char *symbol, size_t bytes, size_t ringBytes,
                                      bool trace) {
  std::string name = symbol ? readableKernelName(symbol) : std::string("?");
  {
    std::lock_guard lock(warnedMu_);
    if (!tooLargeWarned_.insert(name).second) return;
  }
  constexpr double kMb = 1024.0 * 1024.0;
  std::fprintf(
      stderr,
      "[PROTON] kernel %s: a launch needs %.1f MB of intra-kernel buffer, more than the "
      "%.1f MB Proton keeps per device (PROTON_INSTRUMENTATION_RING_MB); such launches run "
      "without recording (stat instrumentation_launches_unrecorded)%s.\n",
      name.c_str(), static_cast<double>(bytes) / kMb, static_cast<double>(ringBytes) / kMb,
      trace ? "; a smaller buffer_size or data='tree' records them" : "");
}

void IntraKernelBuffers::setDriver(const Driver *driver) {
  std::lock_guard lock(mu_);
  driver_ = driver;
}

void IntraKernelBuffers::setContextSync(ContextSync sync) {
  std::lock_guard lock(mu_);
  contextSync_ = sync;
}

bool IntraKernelBuffers::pendingCapture() const {
  return tlsPending.valid && tlsPending.captureGraph;
}

void IntraKernelBuffers::bindCaptured(CaptureContext context, const char *symbol) {
  Pending p = tlsPending;
  tlsPending = Pending{};
  if (!p.valid || !p.captureGraph) return;
  auto captured = std::make_shared<Captured>();
  captured->ring = p.ring;
  captured->offset = p.offset;
  captured->bytes = p.bytes;
  captured->trace = p.trace;
  captured->symbol = StringTable::global().intern(symbol ? symbol : "");
  captured->context = std::move(context);
  std::lock_guard lock(mu_);
  captured_.add(p.captureGraph, std::move(captured));
  anyCaptured_.store(true, std::memory_order_relaxed);
}

void IntraKernelBuffers::onGraphCloned(Graph clone, Graph original) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.cloned(clone, original);
}

void IntraKernelBuffers::onGraphDestroyed(Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.destroyed(graph);
}

void IntraKernelBuffers::onGraphExecCreated(GraphExec exec, Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execCreated(exec, graph);
}

void IntraKernelBuffers::onGraphExecDestroyed(GraphExec exec) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execDestroyed(exec);
}

void IntraKernelBuffers::onGraphExecUpdated(GraphExec exec, Graph graph) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  captured_.execUpdated(exec, graph);
}

uint64_t IntraKernelBuffers::replayKey(GraphExec exec) const {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return 0;
  std::lock_guard lock(mu_);
  const GraphTies<Captured>::List *ofExec = captured_.ofExec(exec);
  if (!ofExec || ofExec->empty() || ofExec->front()->ring >= rings_.size()) return 0;
  return rings_[ofExec->front()->ring].graphBase + ofExec->front()->offset;
}

void IntraKernelBuffers::onGraphLaunched(GraphExec exec, Stream stream, const LaunchEntry *entries,
                                         size_t n) {
  if (!anyCaptured_.load(std::memory_order_relaxed)) return;
  GraphTies<Captured>::List captured;  // a copy: a full ring is drained without the lock
  {
    std::lock_guard lock(mu_);
    const GraphTies<Captured>::List *ofExec = captured_.ofExec(exec);
    if (!ofExec || !driver_) return;
    captured = *ofExec;
  }
  // A capture's slots follow one another in the arena: each run of them is copied out and
  // cleared with one copy and one clear per replay, not two per kernel.
  for (size_t first = 0; first < captured.size();) {
    size_t last = first + 1;
    while (last < captured.size() && captured[last]->ring == captured[first]->ring &&
           captured[last]->offset == captured[last - 1]->offset + captured[last - 1]->bytes)
      ++last;
    replayRun(captured.data() + first, last - first, stream, entries, n);
    first = last;
  }
}

void IntraKernelBuffers::replayRun(const std::shared_ptr<const Captured> *run, size_t count,
                                   Stream stream, const LaunchEntry *entries, size_t n) {
  const size_t bytes = run[count - 1]->offset + run[count - 1]->bytes - run[0]->offset;
  for (int attempt = 0;; ++attempt) {
    std::unique_lock lock(mu_);
    if (run[0]->ring >= rings_.size()) return;
    const Ring &ring = rings_[run[0]->ring];
    Context current = nullptr;
    if (driver_->ctxGetCurrent(&current) != kSuccess) current = nullptr;
    ContextScope scope(*driver_, ring.context, current == ring.context);
    if (!scope.ok()) return;
    Replay r = users_ > 0 ? fileReplay(run, count, bytes, stream, entries, n) : Replay::kNobody;
    if (r == Replay::kFull && attempt == 0 && (!run[0]->trace || traceStartsKnownLocked())) {
      // Nothing else may drain the ring in a loop of graph launches: this launch does, as a
      // launch that finds it full does. A trace's drain needs the kernel records of the eager
      // launches in the ring, which a launch callback cannot flush: where one has not come
      // yet, the replay goes unrecorded (a loop of replays alone has none to wait for).
      lock.unlock();
      uint64_t t0 = monotonicNs();
      drain(*driver_, /*waitForFiling=*/false);  // its sums are filed beside the program
      stat("instrumentation_ring_full_wait_us").add((monotonicNs() - t0) / 1000);
      continue;
    }
    if (r == Replay::kFull || r == Replay::kFailed)
      stat("instrumentation_graph_launches_unrecorded").add(count);
    // The slots start over for the next replay (enqueued after the copy, on that stream).
    driver_->memsetD8Async(ring.graphBase + run[0]->offset, 0, bytes, stream);
    return;
  }
}

IntraKernelBuffers::Replay IntraKernelBuffers::fileReplay(
    const std::shared_ptr<const Captured> *run, size_t count, size_t bytes, Stream stream,
    const LaunchEntry *entries, size_t n) {
  auto recorder = [&](const Captured &c, size_t i) {
    const Session &s = *entries[i].session;
    return s.options().backend == BackendKind::kInstrumentation && c.context.records(s.id());
  };
  bool anyone = false;
  for (size_t k = 0; k < count && !anyone; ++k)
    for (size_t i = 0; i < n && !anyone; ++i) anyone = recorder(*run[k], i);
  if (!anyone) return Replay::kNobody;  // nothing to copy
  if (run[0]->trace && traceCapReached()) {
    stat("instrumentation_launches_past_trace_cap").add(count);
    return Replay::kNobody;
  }
  Ring &ring = rings_[run[0]->ring];
  size_t at = ring.slots.size() + count <= kMaxSlots ? fit(ring, bytes) : kNoRoom;
  if (at == kNoRoom) return Replay::kFull;
  if (driver_->memcpyDtoDAsync(ring.base + at, ring.graphBase + run[0]->offset, bytes, stream) !=
      kSuccess)
    return Replay::kFailed;
  noteStream(ring, reinterpret_cast<uint64_t>(stream));
  if (capturedAt_ == StringId{}) capturedAt_ = StringTable::global().intern("<captured_at>");
  // Where kernel tracing files each replayed kernel: the replay's launch context/<captured_at>/
  // the capture's context, in the instrumentation sessions that recorded at capture. The
  // records go straight into the ring's list, whose room stays from one drain to the next.
  for (size_t k = 0; k < count; ++k) {
    const Captured &c = *run[k];
    SlotRecord &slot = ring.slots.emplace_back();
    for (size_t i = 0; i < n && slot.numEntries < LaunchInfo::kMaxEntries; ++i) {
      if (!recorder(c, i)) continue;
      Session &s = *entries[i].session;
      PhaseId phase = entries[i].phase;
      NodeId node = s.child(phase, entries[i].node, capturedAt_);
      for (StringId name : c.context.names)
        if (node != kNoNode) node = s.child(phase, node, name);
      if (node == kNoNode) continue;
      slot.entries[slot.numEntries++] = {&s, node, phase, c.context.kernelName != StringId{}};
    }
    if (slot.numEntries == 0) {
      ring.slots.pop_back();
      continue;
    }
    slot.offset = at + (c.offset - run[0]->offset);
    slot.bytes = c.bytes;
    slot.trace = c.trace;
    slot.symbol = c.symbol;
    slot.launchName = c.context.kernelName;
  }
  take(ring, at, bytes);
  return Replay::kFiled;
}

void IntraKernelBuffers::noteKernel(uint64_t correlation, uint64_t startNs) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock) {  // a drain holds it, maybe waiting (in the driver) for this thread's CUPTI
    std::lock_guard kept(keptStartsMu_);
    keptStarts_.emplace_back(correlation, startNs);
    return;
  }
  applyKeptStartsLocked();
  auto it = byCorrelation_.find(correlation);
  if (it == byCorrelation_.end()) return;
  rings_[it->second.first].slots[it->second.second].startNs = startNs;
}

void IntraKernelBuffers::applyKeptStartsLocked() {
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  {
    std::lock_guard kept(keptStartsMu_);
    if (keptStarts_.empty()) return;
    starts.swap(keptStarts_);
  }
  for (const auto &[correlation, startNs] : starts) {
    auto it = byCorrelation_.find(correlation);
    if (it != byCorrelation_.end())
      rings_[it->second.first].slots[it->second.second].startNs = startNs;
  }
}

size_t IntraKernelBuffers::wanted(const std::vector<SlotRecord> &slots) {
  return static_cast<size_t>(std::count_if(slots.begin(), slots.end(),
                                           [](const SlotRecord &s) { return s.numEntries > 0; }));
}

size_t kernelTargets(const LaunchEntry *entries, size_t n, StringId symbol, StringId launchName,
                     instrumentation::IntraTarget *out, size_t *gone) {
  const std::string text(StringTable::global().view(symbol));
  StringId name = StringTable::global().intern(readableKernelName(text.c_str()));
  size_t count = 0;
  if (gone) *gone = 0;
  for (size_t i = 0; i < n; ++i) {
    const LaunchEntry &e = entries[i];
    // A kernel-tracing session that runs beside an instrumentation session keeps the profile
    // it would have alone: no scopes, no cycles, no warp lanes.
    if (e.session->options().backend != BackendKind::kInstrumentation) continue;
    StringId frame = e.named && launchName != StringId{} ? launchName : name;
    NodeId node = e.session->child(e.phase, e.node, frame);
    if (node != kNoNode)
      out[count++] = {e.session, e.phase, node};
    else if (gone)
      ++*gone;
  }
  return count;
}

}  // namespace proton::gpu
