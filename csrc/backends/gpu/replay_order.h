// ReplayOrder: keeps apart, on the GPU, the replays of CUDA graphs that share captured slots.
//
//   ReplayOrder &order = ReplayOrder::global();
//   order.entering(driver, key, stream);  // graph launch, API enter: key = its slots' first
//   address
//   ...                                   // API exit: the replay's copies out enqueued on stream
//   order.done(driver, stream, ran);      // same thread, after them (ran: the launch succeeded)
//
// A slot captured into a graph (intra-kernel records, tensor metric values) is written by every
// replay of the graph, of every executable made from it or from a clone of it, and is copied
// out (and cleared) by each replay's launch on the launch's stream. Replays on one stream are
// in order. Replays on two streams would run at once and mix their values: each launch that
// copied slots out records an event after its copies, and the next launch of the same slots on
// another stream makes its stream wait for that event first (the GPU waits; the host does not).
// A launch from another thread of the same slots while one is between its enter and exit waits
// on the host for that one's copies to be enqueued (its exit may drain a full ring first), at
// most kHostWait; past it, it goes on unordered, counted (graph_replays_unordered), as is a
// replay whose event could not be made, recorded or waited for. A graph launched into a
// capture is ordered by its capture. When the backend stops, holds whose exit will not come
// (the callbacks are off) are released (releaseAll).
//
// Thread-safe: one mutex, held for no driver call but eventCreate/eventRecord in done().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "backends/gpu/gpu_driver.h"

namespace proton::gpu {

class ReplayOrder {
 public:
  static ReplayOrder &global();
  static constexpr std::chrono::milliseconds kHostWait{10000};

  // A graph launch begins on this thread (API enter): holds left by one whose exit never came
  // (an error on its way out) are released first.
  void beginLaunch();
  // The launch holds the slots `key` (non-zero) and is about to be enqueued on `stream` (API
  // enter, the launching thread, its context current; no Proton lock held).
  void entering(const Driver &driver, uint64_t key, Stream stream);
  // This thread's graph launch returned: its copies out of the slots it entered with are on
  // `stream` (ran), or it failed or was captured (!ran). Releases every slot it held.
  void done(const Driver &driver, Stream stream, bool ran);
  // A context is being destroyed: its events go with it.
  void onContextDestroying(Context context);
  // A stream is being destroyed: a later stream may get its handle, and is another stream.
  void onStreamDestroying(Stream stream);
  // No exit callback comes from now on: every hold is released.
  void releaseAll();
  // The slots' last replays, for tests: the stream and whether an event follows it.
  bool lastReplay(uint64_t key, Stream *stream) const;

 private:
  struct Mark {
    Event event = nullptr;  // recorded after the last replay's copies (made on first use)
    Context context = nullptr;
    Stream stream = nullptr;  // that replay's
    bool recorded = false;
    std::thread::id thread;  // that replay's launching thread (null and per-thread handles)
    std::thread::id holder;  // a launch between enter and exit (default id: none)
  };

  void release(bool ran, Stream stream, Context context, const Driver *driver);
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::unordered_map<uint64_t, Mark> marks_;  // by the slots' first device address
};

}  // namespace proton::gpu
