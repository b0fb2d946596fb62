// IntraKernelBuffers' drains: waiting for a ring's launches, then reading back and filing its
// slots (intra_kernel_tree_drain.cc, intra_kernel_trace_drain.cc) and clearing them for reuse,
// around the slots of launches still in their call; and the ring of a context being destroyed
// (intra_kernel_buffers.h).
#include <algorithm>
#include <utility>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

Counter &stat(const char *name) { return Stats::global().counter(name); }

}  // namespace

bool IntraKernelBuffers::waitForLaunches(const Driver &driver, Ring &ring) {
  // A stream in a capture begun through a call Proton did not see, or a wait that fails (and
  // may not have waited): only the context tells when the launches before it finished. An
  // error there (a fault of the program's) is the program's to see, not ours.
  bool context = ring.waitContext;
  for (size_t i = 0; i < ring.streams.size() && !context; ++i) {
    auto stream = reinterpret_cast<Stream>(ring.streams[i]);
    context = streamCapturing(driver, stream) || driver.streamSynchronize(stream) != kSuccess;
  }
  for (size_t i = 0; i < ring.marks.size() && !context; ++i)
    context = driver.eventSynchronize(ring.marks[i]) != kSuccess;
  bool waited = true;
  if (context) {
    stat("instrumentation_drains_waiting_for_context").add();
    if (contextSync_)
      waited = contextSync_(ring.context);
    else
      driver.ctxSynchronize();
  }
  ring.spareMarks.insert(ring.spareMarks.end(), ring.marks.begin(), ring.marks.end());
  ring.marks.clear();
  ring.streams.clear();
  ring.waitContext = !waited;
  // Launches still in their call were not waited for: their streams are the next wait's.
  for (const InFlight &f : ring.inFlight) noteStream(ring, f.stream);
  return waited;
}

void IntraKernelBuffers::drain(const Driver &driver, bool waitForFiling) {
  std::lock_guard lock(mu_);
  // Relaxed capture mode, nothing on the legacy stream (which waits for blocking streams, one
  // being captured among them), and no context synchronisation (which a capture on another
  // thread does not survive) unless a stream cannot be waited for.
  RelaxedCaptureMode relaxed(driver);
  std::vector<std::pair<uint64_t, std::pair<size_t, size_t>>> keptCorrelations;
  for (size_t r = 0; r < rings_.size(); ++r) {
    if (rings_[r].end == 0) continue;
    ContextScope scope(driver, rings_[r].context, /*current=*/false);
    if (scope.ok() && drainRing(driver, r, keptCorrelations)) continue;
    // Not drained (a capture under way kept the context from being synchronised): every slot
    // stays for the next drain, with its launch.
    if (scope.ok()) stat("instrumentation_drains_put_off_for_captures").add();
    for (const auto &[correlation, at] : byCorrelation_)
      if (at.first == r) keptCorrelations.push_back({correlation, at});
  }
  byCorrelation_.clear();
  for (const auto &[correlation, at] : keptCorrelations) byCorrelation_[correlation] = at;
  if (waitForFiling) filer_.waitIdle();
}

bool IntraKernelBuffers::drainRing(
    const Driver &driver, size_t r,
    std::vector<std::pair<uint64_t, std::pair<size_t, size_t>>> &keptCorrelations) {
  Ring &ring = rings_[r];
  if (!waitForLaunches(driver, ring)) return false;
  applyKeptStartsLocked();  // starts noted during the wait place the slices
  stat("instrumentation_ring_drains").add();
  std::vector<std::pair<uint64_t, size_t>> moved;
  std::vector<SlotRecord> kept = takeInFlight(ring, r, moved);
  bool anyTrace = false;
  for (const SlotRecord &slot : ring.slots) anyTrace |= slot.trace;
  try {
    drainTree(driver, ring);
    if (anyTrace) drainTrace(driver, ring);
  } catch (...) {
    // Out of host memory for the read-back (up to the ring's size): what was not filed yet is
    // lost, counted; the ring is cleared and set up for the next launches as after any drain
    // (an exception out of here left stale slot indices behind, read past the end later).
    stat("instrumentation_drains_failed").add();
  }
  clearDrained(driver, ring);
  ring.slots.assign(kept.begin(), kept.end());
  for (const auto &[correlation, index] : moved)
    keptCorrelations.push_back({correlation, {r, index}});
  // The launches in flight (their streams are the next wait's): the next slots go around them.
  ring.kept = ring.inFlight;
  ring.used = ring.end = 0;
  for (const InFlight &f : ring.inFlight) ring.end = std::max(ring.end, f.offset + f.bytes);
  return true;
}

void IntraKernelBuffers::onContextDestroying(Context context) {
  std::lock_guard lock(mu_);
  std::erase_if(spareStreams_, [&](const auto &spare) { return spare.first == context; });
  Ring *ring = driver_ ? existingRing(context) : nullptr;
  if (!ring) return;
  const size_t r = static_cast<size_t>(ring - rings_.data());
  // Its launches so far, drained now: the ring's memory goes with the context.
  std::vector<std::pair<uint64_t, std::pair<size_t, size_t>>> kept;
  if (ring->end) {
    RelaxedCaptureMode relaxed(*driver_);
    ContextScope scope(*driver_, context, /*current=*/false);
    if (scope.ok()) drainRing(*driver_, r, kept);
    // Left: every slot if it could not be drained, else those of launches still in their call.
    stat("instrumentation_launches_unrecorded").add(wanted(ring->slots));
  }
  std::erase_if(byCorrelation_, [&](const auto &entry) { return entry.second.first == r; });
  // Retired, not removed (slots elsewhere hold rings' indices): a context made later, even
  // one with the same handle, gets a ring of its own.
  Ring retired;
  retired.reduceTried = true;
  std::swap(*ring, retired);
}

std::vector<IntraKernelBuffers::SlotRecord> IntraKernelBuffers::takeInFlight(
    Ring &ring, size_t index, std::vector<std::pair<uint64_t, size_t>> &kept) {
  std::vector<SlotRecord> out;
  if (ring.inFlight.empty()) return out;
  auto inFlight = [&](const SlotRecord &slot) {
    for (const InFlight &f : ring.inFlight)
      if (f.offset == slot.offset) return true;
    return false;
  };
  std::vector<size_t> newIndex(ring.slots.size(), kNoRoom);
  std::vector<SlotRecord> drained;
  for (size_t i = 0; i < ring.slots.size(); ++i) {
    if (inFlight(ring.slots[i])) {
      newIndex[i] = out.size();
      out.push_back(ring.slots[i]);
    } else {
      drained.push_back(ring.slots[i]);
    }
  }
  for (const auto &[correlation, at] : byCorrelation_)
    if (at.first == index && newIndex[at.second] != kNoRoom)
      kept.push_back({correlation, newIndex[at.second]});
  ring.slots.assign(drained.begin(), drained.end());
  return out;
}

void IntraKernelBuffers::clearDrained(const Driver &driver, Ring &ring) {
  // Units that do not record never write: the next launches must find zeros there. The clear
  // is done before they are enqueued. Not the bytes of launches in flight: their kernels may
  // be running, and nothing touched those bytes since the drain that cleared them.
  std::vector<InFlight> around = ring.inFlight;
  std::sort(around.begin(), around.end(),
            [](const InFlight &a, const InFlight &b) { return a.offset < b.offset; });
  size_t from = 0;
  for (const InFlight &f : around) {
    if (f.offset > from) driver.memsetD8Async(ring.base + from, 0, f.offset - from, ring.ownStream);
    from = std::max(from, f.offset + f.bytes);
  }
  if (ring.end > from) driver.memsetD8Async(ring.base + from, 0, ring.end - from, ring.ownStream);
  driver.streamSynchronize(ring.ownStream);
}

void IntraKernelBuffers::waitForFiling() { filer_.waitIdle(); }

void IntraKernelBuffers::waitForRings(const Driver &driver) {
  std::lock_guard lock(mu_);
  RelaxedCaptureMode relaxed(driver);
  for (Ring &ring : rings_) {
    if (ring.end == 0) continue;
    ContextScope scope(driver, ring.context, /*current=*/false);
    if (scope.ok()) waitForLaunches(driver, ring);
  }
}

bool IntraKernelBuffers::traceStartsKnown() {
  std::lock_guard lock(mu_);
  return traceStartsKnownLocked();
}

bool IntraKernelBuffers::traceStartsKnownLocked() {
  applyKeptStartsLocked();
  for (const auto &[correlation, at] : byCorrelation_) {
    const SlotRecord &slot = rings_[at.first].slots[at.second];
    if (slot.trace && slot.startNs == 0) return false;
  }
  return true;
}

}  // namespace proton::gpu
