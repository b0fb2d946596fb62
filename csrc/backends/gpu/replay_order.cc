#include "backends/gpu/replay_order.h"

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

void ReplayOrder::beginLaunch() {
  if (tlsHeld.n > 0) release(/*ran=*/false, nullptr, nullptr, nullptr);
}

void ReplayOrder::entering(const CudaDriverApi &driver, uint64_t key, CUstream stream) {
  Held &held = tlsHeld;
  if (key == 0 || held.n == Held::kMax) return;
  const std::thread::id self = std::this_thread::get_id();
  CUevent wait = nullptr;
  {
    std::unique_lock lock(mu_);
    auto free = [&] {  // looked up again after each wake: a context's end may erase marks
      auto it = marks_.find(key);
      return it == marks_.end() || it->second.holder == std::thread::id{} ||
             it->second.holder == self;
    };
    if (!released_.wait_for(lock, kHostWait, free)) {
      // The other launch's exit did not come in time: taken over, this replay not ordered
      // after it.
      unordered().add();
      marks_[key].recorded = false;
    }
    Mark &mark = marks_[key];
    mark.holder = self;
    held.keys[held.n++] = key;
    bool sameStream = mark.stream == stream && (sharedHandle(stream) || mark.thread == self);
    if (mark.recorded && !sameStream) wait = mark.event;
  }
  if (!wait) return;
  // Not in a capture: a wait on an event recorded outside it would join the capture to it.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.streamIsCapturing(stream, &capture) != CUDA_SUCCESS) {
    unordered().add();  // (the legacy stream while a blocking stream captures)
    return;
  }
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return;
  if (!driver.streamWaitEvent || driver.streamWaitEvent(stream, wait, 0) != CUDA_SUCCESS)
    unordered().add();
}

void ReplayOrder::done(const CudaDriverApi &driver, CUstream stream, bool ran) {
  if (tlsHeld.n == 0) return;
  // The event goes in the stream's context (the current one for the legacy and per-thread
  // handles, which run in it).
  CUcontext context = nullptr;
  if (ran &&
      (!sharedHandle(stream) || !driver.streamGetCtx ||
       driver.streamGetCtx(stream, &context) != CUDA_SUCCESS || !context) &&
      driver.ctxGetCurrent(&context) != CUDA_SUCCESS)
    context = nullptr;
  release(ran, stream, context, &driver);
}

void ReplayOrder::release(bool ran, CUstream stream, CUcontext context,
                          const CudaDriverApi *driver) {
  Held &held = tlsHeld;
  const std::thread::id self = std::this_thread::get_id();
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < held.n; ++i) {
      auto it = marks_.find(held.keys[i]);
      if (it == marks_.end() || it->second.holder != self) continue;  // taken over meanwhile
      Mark &mark = it->second;
      mark.holder = std::thread::id{};
      if (!ran) continue;  // nothing was copied: the last replay stays the one to wait for
      mark.recorded = false;
      if (context) {
        CUcontext current = nullptr;
        if (driver->ctxGetCurrent(&current) != CUDA_SUCCESS) current = nullptr;
        ContextScope scope(*driver, context, context == current);
        if (mark.event && mark.context != context) {  // made in another context, still alive
          if (scope.ok() && driver->eventDestroy) driver->eventDestroy(mark.event);
          mark.event = nullptr;
        }
        if (!mark.event &&
            (!scope.ok() ||
             driver->eventCreate(&mark.event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS))
          mark.event = nullptr;
        mark.context = context;
        mark.recorded = mark.event && driver->eventRecord(mark.event, stream) == CUDA_SUCCESS;
      }
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
  for (auto it = marks_.begin(); it != marks_.end();) {
    Mark &mark = it->second;
    if (mark.context != context) {
      ++it;
    } else if (mark.holder == std::thread::id{}) {
      it = marks_.erase(it);
    } else {  // held by a launch in progress: kept, its event gone with the context
      mark.event = nullptr;
      mark.context = nullptr;
      mark.recorded = false;
      ++it;
    }
  }
}

void ReplayOrder::onStreamDestroying(CUstream stream) {
  if (!sharedHandle(stream)) return;
  std::lock_guard lock(mu_);
  for (auto &[key, mark] : marks_)
    if (mark.stream == stream) mark.stream = nullptr;  // the next replay anywhere waits
}

void ReplayOrder::releaseAll() {
  {
    std::lock_guard lock(mu_);
    for (auto &[key, mark] : marks_) mark.holder = std::thread::id{};
  }
  released_.notify_all();
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
