#include "backends/gpu/capture_watch.h"

namespace proton::gpu {

void CaptureWatch::beginning(const void *context, const void *stream) {
  std::lock_guard lock(mu_);
  for (Capture &c : captures_) {
    if (!matches(c, stream)) continue;
    if (!c.context) c.context = context;
    return;
  }
  captures_.push_back({context, stream, std::this_thread::get_id()});
  count_.store(captures_.size(), std::memory_order_relaxed);
}

void CaptureWatch::settled(const void *stream, bool capturing) {
  if (capturing) return;
  std::lock_guard lock(mu_);
  std::erase_if(captures_, [&](const Capture &c) { return matches(c, stream); });
  count_.store(captures_.size(), std::memory_order_relaxed);
}

CaptureWatch::Outcome CaptureWatch::whenNoCapture(const void *context,
                                                  std::chrono::milliseconds limit,
                                                  const std::function<void()> &fn) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const std::thread::id self = std::this_thread::get_id();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      bool others = false;
      for (const Capture &c : captures_) {
        // The thread's own capture, on any context: it synchronises none (what a capturing
        // thread may call is restricted; nothing it needs is gained by trying).
        if (c.thread == self) return Outcome::kOwnCapture;
        if (c.context && c.context != context) continue;
        others = true;
      }
      if (!others) {
        fn();  // under the lock: a capture beginning now waits for it
        return Outcome::kRan;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return Outcome::kTimedOut;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CaptureWatch::clear() {
  std::lock_guard lock(mu_);
  captures_.clear();
  count_.store(0, std::memory_order_relaxed);
}

const void *CaptureWatch::ownCapture() const {
  if (count_.load(std::memory_order_relaxed) == 0) return nullptr;
  const std::thread::id self = std::this_thread::get_id();
  std::lock_guard lock(mu_);
  for (const Capture &c : captures_)
    if (c.thread == self) return c.stream;
  return nullptr;
}

size_t CaptureWatch::underWay() const {
  std::lock_guard lock(mu_);
  return captures_.size();
}

}  // namespace proton::gpu
