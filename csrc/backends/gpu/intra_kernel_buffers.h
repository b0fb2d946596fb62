// IntraKernelBuffers: the device memory that instrumented kernels record into, one ring per
// CUDA context, and the launches each part of it belongs to.
//
//   uint64_t ptr = buffers.allocate(driver, bytes, trace, stream);  // launching thread
//   buffers.bindLaunch(correlation, entries, n, symbol, launchName); // its launch callback
//   ...
//   buffers.drain(driver);  // every launch finished and flushed: read back, file, reset
//
// A launch gets one slot, `bytes` as Triton's launcher computed them (grid * bytes per CTA):
// its units' sum records (tree, plus a 16-byte header) or event buffers (trace). A drain
// reduces tree slots on the GPU (tree_reduce.cu; on the host if that kernel cannot be loaded)
// and copies back one small reduced slot per launch; trace slots are copied whole. The slot is tied
// to the next launch on the same thread; its context comes from that launch's callback, so scopes
// land under the kernel's own node. A full ring returns 0 (the caller drains and asks again); a
// launch that cannot get a slot runs with recording off and is counted. A drain on another
// thread may come between a launch's slot being handed out and its kernel reaching its stream
// (the launch call's return): that slot is neither read nor cleared then, but kept, with its
// bytes, for the next drain, and the next slots are placed around it.
//
// A launch being captured into a CUDA graph gets a slot of its own in the context's graph
// arena, kept as long as the process lives (the graph may replay whenever it is launched),
// together with the context of its capture. Each launch of the executable graph then enqueues,
// on its stream, a copy of the slot into a fresh ring slot and a clear of the slot: every
// replay is filed like a launch of its own, under the replay's launch context/<captured_at>/
// <capture context>/<kernel>, where kernel tracing files the replay's kernel (a trace replay,
// whose kernel record is not matched to its slot, is placed by the decoder's known offset
// between kernel records and %globaltimer). A launch
// being captured that finds the arena full runs with recording off and is counted; so is a
// trace replay that finds the ring full before the kernel records of the eager launches in it
// came (its drain needs them, and a launch callback cannot flush them), or the trace at its
// cap. The ring and arena are allocated at a
// GPU's first instrumented launch, in relaxed capture mode and zeroed on a stream of Proton's
// own, so that nothing touches a stream being captured; a trace launch being captured before
// any eager one on its GPU finds none and is counted (its replays could not be placed).
//
// Thread-safe: one mutex, taken by instrumented launches and by drains only; the decoder has
// its own, taken by drains (tree) and by the thread that files trace slots.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/graph_ties.h"
#include "backends/instrumentation/intra_decoder.h"
#include "backends/launch_table.h"
#include "core/background_worker.h"
#include "core/capture_context.h"

namespace proton::gpu {

struct TraceJob;  // a trace slot read back (intra_kernel_trace_drain.cc)

// Where a launch's intra-kernel data goes: the kernel's own node in each instrumentation
// session that recorded the launch (not in kernel-tracing sessions beside them), where kernel
// tracing files the kernel: <context>/<launchName> for entries named by launch metadata
// (hook="triton"), <context>/<kernel> otherwise. Returns the number of targets; *gone, when
// given, is set to the number of instrumentation sessions whose data went meanwhile (the
// session ended, or its phase was cleared): the launch's data is lost for those.
size_t kernelTargets(const LaunchEntry *entries, size_t n, StringId symbol, StringId launchName,
                     instrumentation::IntraTarget *out, size_t *gone = nullptr);

class IntraKernelBuffers {
 public:
  static IntraKernelBuffers &global();
  ~IntraKernelBuffers();  // tests' own; the global one is never destroyed
  // Streams a drain waits for one by one; past them, it waits for the context.
  static constexpr size_t kWaitStreams = 64;

  // Instrumentation sessions using the buffers (under the backend's lock).
  void addUser();
  void removeUser();
  bool inUse() const;
  instrumentation::ScopeTables &tables() { return tables_; }
  // Ring size per context, the trace's cap on slices, and events per recording unit (the
  // mode's buffer size: it fixes the layout the decoder walks).
  void setLimits(uint64_t ringBytes, uint64_t maxTraceEvents, uint32_t traceCapacity);

  enum class Alloc { kOk, kFull, kOff };
  // A slot of at least `bytes` for the next launch on this thread, in the context the launch
  // will run in: the current one, or, on a thread that has none yet, the stream's (device
  // 0's primary context for the default streams), which Triton's launcher makes current after
  // its allocator ran.
  Alloc allocate(const Driver &driver, size_t bytes, bool trace, uint64_t stream,
                 uint64_t *devicePtr);
  // The driver that graph launches enqueue their copies with (the backend's).
  void setDriver(const Driver *driver);
  // How a drain waits for a whole context, where its launches' streams cannot be waited for
  // (the context current): the backend's, which does not synchronise while a CUDA graph is
  // being captured on it (a capture does not survive that) and then returns false; the ring's
  // drain is then put off to the next one (counted). Unset: the driver's ctxSynchronize.
  using ContextSync = bool (*)(Context context);
  void setContextSync(ContextSync sync);
  // The backend's launch callback (API enter, launching thread): ties the pending slot, if any. A
  // slot for a launch being captured takes the context of the capture instead (bindCaptured).
  bool pendingCapture() const;
  void bindCaptured(CaptureContext context, const char *symbol);
  void bindLaunch(uint64_t correlation, const LaunchEntry *entries, size_t n, const char *symbol,
                  StringId launchName);
  // The launch call returned (API exit of the outermost launch, launching thread; not Proton's
  // own launches): its kernel is on its stream, so a drain's wait for the stream covers it.
  // Until then a drain keeps the launch's slot, bytes and stream for the next drain.
  // `captured`: the launch was captured into a CUDA graph instead, though its stream was not
  // capturing when its slot was handed out (another thread began the capture in between). Its
  // replays will write into that eager slot: it is never handed out again, and the launch is
  // counted as unrecorded (instrumentation_graph_launches_unrecorded).
  void launchReturned(bool captured = false);
  // This thread's slot handed out for a launch that never came (Triton's launcher skips an
  // empty grid), or tied to one whose return was not seen: not in flight any more. At the
  // thread's next allocation and at its end.
  void forgetThreadsSlots();
  // CUDA graphs: a graph launch returned (launching thread, its context current), and the
  // graphs and executables that carry captured slots.
  void onGraphLaunched(GraphExec exec, Stream stream, const LaunchEntry *entries, size_t n);
  void onGraphCloned(Graph clone, Graph original);
  void onGraphDestroyed(Graph graph);
  void onGraphExecCreated(GraphExec exec, Graph graph);
  void onGraphExecDestroyed(GraphExec exec);
  void onGraphExecUpdated(GraphExec exec, Graph graph);
  // The device address of the first slot an executable graph's replays copy out (0: none),
  // which ReplayOrder keys its replays by.
  uint64_t replayKey(GraphExec exec) const;
  // A kernel record arrived (its start aligns trace slices). Never waits for the drains' lock:
  // CUPTI's record threads call it holding CUPTI's own locks, which a drain's driver calls
  // (a reduction launch, a stream wait) may take; while a drain runs, the start is kept aside
  // and set by the next reader of starts.
  void noteKernel(uint64_t correlation, uint64_t startNs);
  // A stream is about to begin a capture, join one (wait for an event) or be destroyed (its
  // API call's enter, on the calling thread): the launches into the rings on it so far are
  // marked with an event, for the next drain to wait for, while it still can. A capture on a
  // blocking stream marks the legacy stream too.
  void onStreamRetiring(Stream stream, bool captureBegins);
  // A launch that failed: it will have no kernel record (a trace drain waits for none).
  void cancelLaunch(uint64_t correlation);
  // A context is being destroyed (cudaDeviceReset, cuCtxDestroy; still usable): its ring is
  // drained now (its launches still in their call are counted as unrecorded) and retired, so
  // that a context made later, even one with the same handle, records into memory of its own.
  void onContextDestroying(Context context);
  // Waits for the launches that wrote into each ring, then reduces (tree) or copies back
  // (trace) every slot, files it into its sessions and clears the ring for reuse. Tree slots
  // need nothing from kernel records; trace slots need their kernel's start, so a trace
  // drain follows a flush of the vendor's records. Trace slots are decoded, and tree slots' reduced
  // sums filed, on a thread of their own; with waitForFiling the drain returns once they are (a
  // flush), else at once (a full ring, on the launching thread).
  void drain(const Driver &driver, bool waitForFiling = true);
  void waitForFiling();
  // What a drain waits for first, done beforehand: a full trace ring waits for its launches,
  // then for their kernel records (traceStartsKnown), then drains. Not a flush, whose context
  // synchronisation would end a CUDA graph being captured on another thread.
  void waitForRings(const Driver &driver);
  // Every launch with a trace slot has its kernel record's start (a replay has none to wait for).
  bool traceStartsKnown();

 private:
  struct SlotRecord {
    size_t offset = 0;
    size_t bytes = 0;
    bool trace = false;
    uint64_t startNs = 0;
    StringId symbol;      // the kernel's name as the vendor gave it (its text goes with its module)
    StringId launchName;  // the kernel's name from launch metadata, for named entries
    // 0: filed in no session; also a slot counted as unrecorded when the last session ended
    // (removeUser), which drains then neither read nor count again.
    uint32_t numEntries = 0;
    LaunchEntry entries[LaunchInfo::kMaxEntries];
  };
  // The slots that some session may still want: not yet counted as lost.
  static size_t wanted(const std::vector<SlotRecord> &slots);
  struct InFlight {
    uint64_t ticket = 0;
    size_t offset = 0;
    size_t bytes = 0;
    uint64_t stream = 0;
  };
  struct Ring {
    Context context = nullptr;
    int device = 0;
    DevicePtr base = 0;
    size_t capacity = 0;
    size_t used = 0;
    double cyclesPerNs = 0;
    std::vector<SlotRecord> slots;
    // CUDA graph slots, never reused.
    DevicePtr graphBase = 0;
    size_t graphCapacity = 0;
    size_t graphUsed = 0;
    // The tree reduction: its kernel (null: reduce on the host), descriptors and output.
    Function reduce = nullptr;
    bool reduceTried = false;
    DevicePtr reduceDescs = 0;
    DevicePtr reduceOut = 0;
    // Proton's own non-blocking stream: the ring is zeroed, read back and cleared on it.
    Stream ownStream = nullptr;
    // What a drain waits for before it reads the ring: the streams its launches (and graph
    // replays' copies into it) ran on since the last drain, and a mark recorded on each of
    // those that began a capture or was destroyed since. Not the context: a capture under way
    // on another thread does not survive that. The context only where a stream cannot be
    // waited for (the per-thread default stream, more than kWaitStreams streams, a mark not
    // recorded, a capture begun unseen), counted.
    std::vector<uint64_t> streams;  // Stream; room for kWaitStreams, made with the ring
    std::vector<Event> marks;       // recorded since the last drain
    std::vector<Event> spareMarks;  // made, free
    bool waitContext = false;
    // Slots handed out whose launch call has not returned: the kernel may not be on its stream
    // yet, so no wait covers it. A drain neither reads nor clears them; it keeps them (`kept`)
    // and the next slots are placed around them.
    std::vector<InFlight> inFlight;  // room for kWaitStreams, made with the ring
    std::vector<InFlight> kept;      // in flight at the last drain
    std::vector<InFlight> pinned;    // eager slots captured into graphs: never handed out again
    size_t end = 0;                  // past the last byte of every slot since the last drain
  };

  Ring *ringFor(const Driver &driver, Context context);  // mu_ held
  Ring *existingRing(Context context);                   // mu_ held; null if none
  // mu_ held, within allocate(): a slot in the graph arena for a launch being captured.
  Alloc allocateGraphSlot(const Driver &driver, size_t bytes, bool trace, uint64_t stream,
                          uint64_t *devicePtr);
  // A launch captured into a graph: its slot in the arena and the context of its capture.
  struct Captured {
    size_t ring = 0;
    size_t offset = 0;
    size_t bytes = 0;
    bool trace = false;
    StringId symbol;  // the kernel's name as the vendor gave it (its text goes with its module)
    CaptureContext context;
  };
  // One replay of a run of captured slots that follow one another in the arena: copied out
  // (fileReplay) and cleared, draining the ring first if it is full.
  void replayRun(const std::shared_ptr<const Captured> *run, size_t count, Stream stream,
                 const LaunchEntry *entries, size_t n);
  // mu_ held, the ring's context current: the run's `bytes`, copied into fresh ring slots
  // filed under the replay's entries (kFiled), unless no session records it, the ring is
  // full or the copy failed.
  enum class Replay { kFiled, kNobody, kFull, kFailed };
  Replay fileReplay(const std::shared_ptr<const Captured> *run, size_t count, size_t bytes,
                    Stream stream, const LaunchEntry *entries, size_t n);
  // mu_ held: where `bytes` fit in the ring from `used` on, around the kept slots (kNoRoom:
  // they do not), and that place taken.
  static constexpr size_t kNoRoom = ~size_t{0};
  static size_t fit(const Ring &ring, size_t bytes);
  static void take(Ring &ring, size_t at, size_t bytes);
  // mu_ held: the launch `ticket` in `ring` returned, or its slot will never be launched.
  void release(size_t ring, uint64_t ticket);
  // mu_ held: the launch `ticket` in `ring` was captured into a graph (launchReturned).
  void pinCaptured(Ring &ring, uint64_t ticket, uint64_t correlation);
  // mu_ held, within drain(), after the wait: the slots in flight out of ring.slots (returned
  // with their correlations' new indices in `kept`), the rest cleared on the GPU.
  std::vector<SlotRecord> takeInFlight(Ring &ring, size_t index,
                                       std::vector<std::pair<uint64_t, size_t>> &kept);
  void clearDrained(const Driver &driver, Ring &ring);
  // mu_ held, ring r's context current: waits for its launches, then files and clears its slots
  // but those in flight (their correlations' new places added to `keptCorrelations`); false:
  // its launches could not be waited for, nothing done.
  bool drainRing(const Driver &driver, size_t r,
                 std::vector<std::pair<uint64_t, std::pair<size_t, size_t>>> &keptCorrelations);
  // mu_ held: a launch, or a replay's copy, into `ring` on `stream` (the launch path: no
  // allocation).
  void noteStream(Ring &ring, uint64_t stream);
  // mu_ held, within onStreamRetiring: `stream`, if the ring waits for it, marked.
  void markStream(Ring &ring, Stream stream, Context current);
  // mu_ held, ring's context current: every launch that wrote into the ring has finished
  // (false: not known, the context could not be synchronised; the next wait is the context's).
  bool waitForLaunches(const Driver &driver, Ring &ring);
  bool traceStartsKnownLocked();  // mu_ held
  void applyKeptStartsLocked();   // mu_ held: the starts noteKernel kept aside, set
  // mu_ held: the context a launch on `stream` runs in when none is current (null: unknown).
  Context launchContext(const Driver &driver, uint64_t stream);
  // Where a slot's launch goes: its sessions' kernel nodes, written into `targets`.
  static instrumentation::IntraLaunch launchOf(const Ring &ring, const SlotRecord &slot,
                                               instrumentation::IntraTarget *targets);
  void fileTreeSlot(const Ring &ring, const SlotRecord &slot, const uint8_t *reduced);
  void fileReduced(const uint8_t *reduced, const instrumentation::IntraLaunch &launch);
  // mu_ held: `reduced` (one reduced slot per slot of `slots`) filed on the filing thread, so
  // that a full ring's drain does not wait for it (a flush waits for the filing thread).
  struct TreeJob;
  void postTreeJob(const Ring &ring, const SlotRecord *const *slots, std::vector<uint8_t> reduced);
  // mu_ held, ring's context current: file every tree slot of the ring (those it cannot
  // read back are counted as unrecorded launches).
  void drainTree(const Driver &driver, Ring &ring);

  // mu_ held, ring's context current: read back every trace slot the trace can still keep,
  // count its slices (the cap) and post it to the filing thread (this and the three below:
  // intra_kernel_trace_drain.cc).
  void drainTrace(const Driver &driver, const Ring &ring);
  // mu_ held: a slot read back, or null (past the cap, or not read back: counted).
  std::shared_ptr<TraceJob> readTraceSlot(const Driver &driver, const Ring &ring,
                                          const SlotRecord &slot);
  // mu_ held: copies a trace slot's units back into job (their headers, then the event places
  // written); false if a copy failed.
  bool readWritten(const Driver &driver, Stream stream, DevicePtr slot, size_t bytes,
                   TraceJob &job);
  // `bytes` at `from` copied into `to` on `stream` (a drain's own), and waited for.
  static bool readBack(const Driver &driver, Stream stream, void *to, DevicePtr from, size_t bytes);
  // mu_ held: the slices read back reach the decoder's cap (set under mu_ and decoderMu_, so
  // mu_ alone reads it).
  bool traceCapReached() const { return reservedSlices_ >= decoder_.maxTraceEvents(); }
  // Each job's slices, counted in parts on up to kCountThreads threads.
  void countSlices(std::shared_ptr<TraceJob> *jobs, size_t n) const;
  bool loadReduce(const Driver &driver, Ring &ring);
  // Once per kernel: its launches' buffers do not fit the ring.
  void warnTooLarge(const char *symbol, size_t bytes, size_t ringBytes, bool trace);

  mutable std::mutex mu_;
  // Kernel starts (correlation, ns) noted while mu_ was held: never held across anything.
  std::mutex keptStartsMu_;
  std::vector<std::pair<uint64_t, uint64_t>> keptStarts_;
  int users_ = 0;
  uint64_t ringBytes_ = uint64_t{256} << 20;
  uint32_t traceUnitBytes_ = instrumentation::kTraceUnitHeaderBytes + 8 * 256;
  std::vector<Ring> rings_;
  // Streams made for rings that could not be set up, kept for their context's next try.
  std::vector<std::pair<Context, Stream>> spareStreams_;
  Context primary_ = nullptr;           // device 0's primary context, retained once when needed
  bool allocationFailureSaid_ = false;  // a ring that could not be allocated, said once
  std::mutex warnedMu_;                 // not mu_: bindLaunch may run under it (a drain's launch)
  std::unordered_set<std::string> tooLargeWarned_;
  std::unordered_map<uint64_t, std::pair<size_t, size_t>> byCorrelation_;  // ring, slot
  uint64_t tickets_ = 0;  // of slots handed out to eager launches
  const Driver *driver_ = nullptr;
  ContextSync contextSync_ = nullptr;
  GraphTies<Captured> captured_;
  std::atomic<bool> anyCaptured_{false};
  std::atomic<bool> anyStreams_{false};  // a ring has streams to wait for
  StringId capturedAt_;
  instrumentation::ScopeTables tables_;
  // Trace slices the launches read back so far will hold: the cap is decided on it, before
  // they are decoded.
  uint64_t reservedSlices_ = 0;
  std::vector<uint8_t> headers_;  // a drain's trace unit headers, read back first
  // The buffer a tree job read back into, given back by the filing thread for the next drain.
  std::mutex spareMu_;
  std::vector<uint8_t> spareReduced_;
  std::mutex decoderMu_;  // the decoder: drains (tree) and the filing thread (trace)
  instrumentation::IntraDecoder decoder_{tables_};
  BackgroundWorker filer_{size_t{512} << 20};  // last: its jobs use the members above
};

}  // namespace proton::gpu
