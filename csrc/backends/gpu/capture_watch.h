// CaptureWatch: which CUDA graph captures are under way, on which context, begun by which
// thread, so that a flush synchronises a context only while nothing is being captured on it.
// A context synchronisation ends every capture on that context, whatever the capture's mode
// and whichever thread began it; a flush that synchronised at such a moment broke the
// program's graph.
//
//   watch.beginning(context, stream);          // enter of every begin-capture call
//   watch.settled(stream, capturingNow);       // exit of begin- and end-capture calls
//   watch.whenNoCapture(context, limit, [&] { driver.ctxSynchronize(); });
//
// whenNoCapture runs its function once no capture is under way on the context, waiting for
// other threads' captures to end (up to `limit`); a capture of the calling thread's own, on any
// context, would not end while it waits, so it returns at once. A begin-capture call waits while
// the function runs: no capture begins during the synchronisation.
//
// A call may be seen twice (a runtime call reaches the driver's): a stream is one capture (the
// per-thread default stream, one per thread), and its context is the first non-null one seen. A
// begin that failed leaves no capture, unless the stream was capturing already. Captures begun
// before Proton subscribed are not known.
//
// Thread-safe: one mutex, taken by capture calls and by flushes only.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/gpu/gpu_driver.h"

namespace proton::gpu {

class CaptureWatch {
 public:
  enum class Outcome {
    kRan,         // the function ran with no capture under way on the context
    kOwnCapture,  // the calling thread is capturing on the context: not run
    kTimedOut,    // another thread's capture outlasted the limit: not run
  };

  void beginning(const void *context, const void *stream);
  void settled(const void *stream, bool capturing);
  Outcome whenNoCapture(const void *context, std::chrono::milliseconds limit,
                        const std::function<void()> &fn);
  size_t underWay() const;
  // The stream of a capture the calling thread began and has not ended; null if none. One
  // relaxed load when no capture is under way anywhere.
  const void *ownCapture() const;
  void clear();  // Proton stops watching: the captures under way are not known any more

 private:
  struct Capture {
    const void *context;  // null: not known yet, taken to be on every context
    const void *stream;
    std::thread::id thread;
  };

  bool matches(const Capture &c, const void *stream) const {
    return c.stream == stream &&
           (stream != kPerThreadStream || c.thread == std::this_thread::get_id());
  }

  mutable std::mutex mu_;
  std::vector<Capture> captures_;
  std::atomic<size_t> count_{0};  // captures_.size(), for ownCapture's quick answer
};

}  // namespace proton::gpu
