#include "backends/gpu/replay_order.h"

#include <cstddef>

#include "backends/gpu/gpu_driver.h"
#include "core/stats.h"

namespace proton::gpu {
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
bool sharedHandle(Stream stream) { return reinterpret_cast<uintptr_t>(stream) > 2; }

}  // namespace

ReplayOrder &ReplayOrder::global() {
  static ReplayOrder *order = new ReplayOrder();  // outlives exit handlers
  return *order;
}

void ReplayOrder::beginLaunch() {
  if (tlsHeld.n > 0) release(/*ran=*/false, nullptr, nullptr, nullptr);
}

void ReplayOrder::entering(const Driver &driver, uint64_t key, Stream stream) {
  Held &held = tlsHeld;
  if (key == 0 || held.n == Held::kMax) return;
  const std::thread::id self = std::this_thread::get_id();
  Event wait = nullptr;
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
  CaptureStatus capture = CaptureStatus::kNone;
  if (driver.streamIsCapturing(stream, &capture) != kSuccess) {
    unordered().add();  // (the legacy stream while a blocking stream captures)
    return;
  }
  if (capture != CaptureStatus::kNone) return;
  if (!driver.streamWaitEvent || driver.streamWaitEvent(stream, wait, 0) != kSuccess)
    unordered().add();
}

void ReplayOrder::done(const Driver &driver, Stream stream, bool ran) {
  if (tlsHeld.n == 0) return;
  // The event goes in the stream's context (the current one for the legacy and per-thread
  // handles, which run in it).
  Context context = nullptr;
  if (ran &&
      (!sharedHandle(stream) || !driver.streamGetCtx ||
       driver.streamGetCtx(stream, &context) != kSuccess || !context) &&
      driver.ctxGetCurrent(&context) != kSuccess)
    context = nullptr;
  release(ran, stream, context, &driver);
}

void ReplayOrder::release(bool ran, Stream stream, Context context, const Driver *driver) {
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
        Context current = nullptr;
        if (driver->ctxGetCurrent(&current) != kSuccess) current = nullptr;
        ContextScope scope(*driver, context, context == current);
        if (mark.event && mark.context != context) {  // made in another context, still alive
          if (scope.ok() && driver->eventDestroy) driver->eventDestroy(mark.event);
          mark.event = nullptr;
        }
        if (!mark.event &&
            (!scope.ok() || driver->eventCreate(&mark.event, kEventDisableTiming) != kSuccess))
          mark.event = nullptr;
        mark.context = context;
        mark.recorded = mark.event && driver->eventRecord(mark.event, stream) == kSuccess;
      }
      mark.stream = stream;
      mark.thread = self;
      if (!mark.recorded) unordered().add();
    }
  }
  held.n = 0;
  released_.notify_all();
}

void ReplayOrder::onContextDestroying(Context context) {
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

void ReplayOrder::onStreamDestroying(Stream stream) {
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

bool ReplayOrder::lastReplay(uint64_t key, Stream *stream) const {
  std::lock_guard lock(mu_);
  auto it = marks_.find(key);
  if (it == marks_.end() || !it->second.recorded) return false;
  *stream = it->second.stream;
  return true;
}

}  // namespace proton::gpu
