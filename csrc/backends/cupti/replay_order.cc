#include "backends/cupti/replay_order.h"

#include <cstddef>

#include "backends/cupti/cupti_loader.h"
#include "core/stats.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

// The slots this thread's graph launch in progress holds (one per kind of slot).
struct Held {
  static constexpr size_t kMax = 4;
  uint64_t keys[kMax] = {};
  size_t n = 0;
};
thread_local Held tlsHeld;

Counter &unordered() { return Stats::global().counter("graph_replays_unordered"); }

// The legacy and per-thread handles (and null) name a stream per thread for the per-thread
// one: replays through them on two threads are not known to be in one stream.
bool sharedHandle(CUstream stream) { return reinterpret_cast<uintptr_t>(stream) > 2; }

}  // namespace

ReplayOrder &ReplayOrder::global() {
  static ReplayOrder *order = new ReplayOrder();  // outlives exit handlers
  return *order;
}

void ReplayOrder::entering(const CudaDriverApi &driver, uint64_t key, CUstream stream) {
  Held &held = tlsHeld;
  if (key == 0 || held.n == Held::kMax) return;
  const std::thread::id self = std::this_thread::get_id();
  CUevent wait = nullptr;
  {
    std::unique_lock lock(mu_);
    Mark &mark = marks_[key];  // references into the map stay valid while it grows
    if (mark.holder != std::thread::id{} && mark.holder != self &&
        !released_.wait_for(lock, kHostWait, [&] { return mark.holder == std::thread::id{}; })) {
      // The other launch's exit never came (its callbacks went off with the session): taken
      // over, and this replay not ordered after it.
      unordered().add();
      mark.recorded = false;
    }
    mark.holder = self;
    held.keys[held.n++] = key;
    bool sameStream = mark.stream == stream && (sharedHandle(stream) || mark.thread == self);
    if (mark.recorded && !sameStream) wait = mark.event;
  }
  if (!wait) return;
  // Not in a capture: a wait on an event recorded outside it would join the capture to it.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.streamIsCapturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return;
  if (!driver.streamWaitEvent || driver.streamWaitEvent(stream, wait, 0) != CUDA_SUCCESS)
    unordered().add();
}

void ReplayOrder::done(const CudaDriverApi &driver, CUstream stream, bool ran) {
  Held &held = tlsHeld;
  if (held.n == 0) return;
  const std::thread::id self = std::this_thread::get_id();
  CUcontext current = nullptr;
  if (ran && driver.ctxGetCurrent(&current) != CUDA_SUCCESS) current = nullptr;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < held.n; ++i) {
      auto it = marks_.find(held.keys[i]);
      if (it == marks_.end() || it->second.holder != self) continue;  // taken over meanwhile
      Mark &mark = it->second;
      mark.holder = std::thread::id{};
      if (!ran) continue;  // nothing was copied: the last replay stays the one to wait for
      if (mark.event && mark.context != current) mark.event = nullptr;  // another context's
      if (!mark.event &&
          (!current || driver.eventCreate(&mark.event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS))
        mark.event = nullptr;
      mark.context = current;
      mark.recorded = mark.event && driver.eventRecord(mark.event, stream) == CUDA_SUCCESS;
      mark.stream = stream;
      mark.thread = self;
      if (!mark.recorded) unordered().add();
    }
  }
  held.n = 0;
  released_.notify_all();
}

void ReplayOrder::onContextDestroying(CUcontext context) {
  std::lock_guard lock(mu_);
  std::erase_if(marks_, [&](const auto &m) { return m.second.context == context; });
}

bool ReplayOrder::lastReplay(uint64_t key, CUstream *stream) const {
  std::lock_guard lock(mu_);
  auto it = marks_.find(key);
  if (it == marks_.end() || !it->second.recorded) return false;
  *stream = it->second.stream;
  return true;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
