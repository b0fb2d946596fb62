// DeviceMetricBuffers: the GPU backends' DeviceMetricSink (core/tensor_metric.h). Tensor
// metric values are copied on the device, on the stream that gave them, and read back at
// flush; nothing waits for the GPU when a value is given.
//
//   buffers.setDriver(driver, flushFn);          // backend start
//   Handle h = buffers.copy(tensor);             // scope entry: copied into a slot
//   buffers.bind(h, spec, targets, n);           // where it is filed
//   buffers.beforeSync();                        // backend flush, before it synchronises
//   buffers.drain(synced);                       // ... and after: reads back what it covered
//
// Memory, per GPU context (the one owning the tensor's memory):
//   eager ring    [ slot | slot | ... ]  8-byte aligned slots, one per value given; reset
//                                         at each drain; a full ring flushes first
//   capture arena [ slot | slot | ... ]  one slot per value given inside graph capture,
//                                         never reused (graphs may replay at any time)
//
// Scalar metrics given while the calling thread captures a graph (scope metrics: the thread
// that began the capture, CaptureWatch) are tied to the graph the same way and added, on the
// host, at each replay: no copy is captured for them.
//
// Copies. A value is copied by Proton's copy kernel (Driver::copyKernelAsync), a launch the
// core files as <metric> under __proton_launch_metadata, as triton.profiler files its own copy
// kernel: the profiler's GPU work shows where it was asked for. A driver without the kernel
// copies with memcpyDtoDAsync, filed nowhere.
//
// CUDA graphs. A value given on a stream being captured becomes a copy node writing into
// its capture slot (the copy into the arena is what is captured). Each graph launch
// (cuGraphLaunch, seen by the launch callback after it returned) then enqueues, on the
// launch's stream, one plain copy from each capture slot of that executable graph into a
// fresh eager slot, filed under the replay's launch context/<captured_at>/<capture context>.
// Stream order makes this exact: the replay's copy node has written the capture slot before
// the plain copy reads it, and the next replay, enqueued later on the stream, cannot
// overwrite it before. A replay while no session records (deactivated) enqueues nothing, so
// its value is never filed, and the next replay's copy node overwrites it: no leak.
// Executables are tied to the capture slots of the graph they were instantiated from (the
// GRAPH_CLONED and GRAPHEXEC_CREATED resource callbacks).
//
// Read-back. A drain reads the values given before the flush's synchronisation (beforeSync),
// in the contexts it synchronised (contexts() lists the rings' for it); the others stay on the
// device for the next drain (a value given meanwhile may not have landed; a context where a
// CUDA graph was being captured was not synchronised, since the capture would not survive it).
// A context being destroyed has its values read back, and its ring retired. It copies on the ring's
// own non-blocking stream, in relaxed capture mode: nothing it does waits for, or is refused by, a
// capture under way, on any thread.
//
// Losses are counted: tensor_metrics_dropped (no memory, a full ring during a replay, a
// pointer the driver does not know).
// Thread-safe: one mutex, taken when a tensor metric is given, at graph launches of graphs
// holding tensor metrics, at graph creation and destruction, and at drains.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/graph_ties.h"
#include "backends/launch_table.h"
#include "core/tensor_metric.h"

namespace proton::gpu {

class DeviceMetricBuffers final : public DeviceMetricSink {
 public:
  static constexpr size_t kRingBytes = size_t(4) << 20;
  static constexpr size_t kArenaChunkBytes = size_t(64) << 10;

  static DeviceMetricBuffers &global();

  // flush: the backend's flush (every launch finished, then drain()). ownCapture: the stream
  // the calling thread captures a graph on, or null (CaptureWatch::ownCapture).
  void setDriver(const Driver *driver, std::function<void()> flush,
                 std::function<Stream()> ownCapture = nullptr);

  bool capturing(const DeviceTensor &tensor) override;
  Handle copy(const DeviceTensor &tensor) override;
  void bind(Handle handle, const MetricSpec &spec, const MetricTarget *targets, size_t n) override;
  void discard(Handle handle) override;
  void recordCaptured(const TensorMetric &metric, CaptureContext context,
                      StringId sliceName) override;
  bool threadCapturing() override;
  void recordCapturedScalars(const MetricList &metrics, CaptureContext context,
                             StringId sliceName) override;
  size_t pending() const override { return pending_.load(std::memory_order_relaxed); }

  // Graph bookkeeping (resource callbacks).
  void onGraphCloned(Graph clone, Graph original);
  void onGraphExecCreated(GraphExec exec, Graph graph);
  void onGraphExecDestroyed(GraphExec exec);
  void onGraphExecUpdated(GraphExec exec, Graph graph);
  void onGraphDestroyed(Graph graph);
  // The device address of the first capture slot an executable graph's replays copy out (0:
  // none), which ReplayOrder keys its replays by.
  uint64_t replayKey(GraphExec exec) const;
  // A graph launch returned successfully (launching thread, no Proton lock held).
  void onGraphLaunched(GraphExec exec, Stream stream, const LaunchEntry *entries, size_t n,
                       uint64_t launchNs, uint64_t threadId);

  // The values given so far are those the next drain reads: the flush synchronises next.
  void beforeSync();
  // The contexts holding rings: a flush synchronises them.
  std::vector<Context> contexts() const;
  // Reads back, files and frees the values given before beforeSync in the `synced` contexts;
  // a ring starts over once none is left on it.
  void drain(const std::vector<Context> &synced);
  // A context is about to be destroyed (its resource callback): its values are read back and
  // filed, and its ring retired (a context made later, even with the same handle, gets one of
  // its own).
  void onContextDestroying(Context context);

 private:
  struct Ring {
    Context context = nullptr;
    DevicePtr base = 0;
    Stream stream = nullptr;  // Proton's own, non-blocking: read-backs
    size_t used = 0;
    size_t settled = 0;            // the part given before the flush's synchronisation
    std::vector<DevicePtr> arena;  // capture chunks, never freed
    size_t arenaUsed = kArenaChunkBytes;
  };
  struct Record {
    DeviceTensor tensor;
    size_t ring = 0;
    size_t offset = 0;
    bool onDevice = true;
    std::vector<uint8_t> host;  // the value, once read back while not yet bound
    bool bound = false;
    MetricSpec spec;
    std::vector<MetricTarget> targets;
  };
  struct Captured {
    TensorMetric metric;
    CaptureContext context;
    StringId sliceName;
    size_t ring = 0;
    DevicePtr slot = 0;
    MetricList scalars;  // non-empty: scalar metrics, added on the host at each replay
  };

  Ring *ringFor(Context context, size_t *index);  // mu_ held; allocates on first use
  bool allocate(Context context, DevicePtr *out, size_t bytes, Stream *stream = nullptr);
  // mu_ held, relaxed capture mode: the values of ring i below `upTo` read back and filed (or
  // kept on the host until bound); false: some are left (given past upTo).
  bool readRing(size_t i, size_t upTo);
  // filed: by Proton's copy kernel where the driver has it (a launch the core files as
  // <metric>), else, and when it fails, by memcpyDtoDAsync (filed nowhere).
  bool enqueueCopy(Context context, DevicePtr dst, DevicePtr src, size_t bytes, Stream stream,
                   bool filed);
  // mu_ held: a slot of the ring, or false when full.
  bool takeSlot(Ring &ring, size_t bytes, size_t *offset);
  void file(const Record &record, const uint8_t *bytes);  // mu_ held
  void updatePending();                                   // mu_ held

  // mu_ held: a replay's scalar metrics, added to where it files them.
  void fileScalars(const Captured &c, const LaunchEntry *entries, size_t n, uint64_t launchNs,
                   uint64_t threadId);
  // mu_ held: the graph the stream captures into, or null (counted as dropped).
  Graph capturingGraph(Stream stream);

  const Driver *driver_ = nullptr;
  std::function<void()> flush_;
  std::function<Stream()> ownCapture_;
  mutable std::mutex mu_;
  std::vector<Ring> rings_;
  std::unordered_map<Handle, Record> records_;
  Handle next_ = 1;
  std::atomic<size_t> pending_{0};
  std::atomic<bool> anyCaptured_{false};
  GraphTies<Captured> captured_;
  StringId capturedAt_;
};

}  // namespace proton::gpu
