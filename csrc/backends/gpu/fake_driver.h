// A GPU driver (gpu::Driver) with no GPU, for the tests of the GPU-side logic: contexts are
// tags, device memory is a host vector, and Proton's GPU tree reduction runs as
// reduceTreeSlot() does on the host; and what those tests read their sessions with. Test-only;
// one copy of its state for the test binary (inline variables).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/instrumentation/intra_decoder.h"
#include "core/session.h"
#include "core/string_table.h"

namespace proton::gpu {

inline StringId S(const std::string &s) { return StringTable::global().intern(s); }

inline SessionOptions instrumentation() {
  SessionOptions options;
  options.backend = BackendKind::kInstrumentation;
  return options;
}

// A node's metric in phase 0 (-1: none).
inline double metric(Session &session, NodeId node, const char *name) {
  double value = -1;
  session.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    const FlexMetrics *f = p.flex(node);
    const NamedMetric *m = f ? f->find(S(name)) : nullptr;
    if (m)
      value = std::holds_alternative<double>(m->value)
                  ? std::get<double>(m->value)
                  : static_cast<double>(std::get<int64_t>(m->value));
  });
  return value;
}

// A driver with no GPU: contexts are tags, one context stack, allocations remember the
// context that was current when they were made. Its errors carry CUDA's numbers.
namespace fake {
inline constexpr DriverResult kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3,
                              kInvalidContext = 201, kInvalidHandle = 400, kNotFound = 500,
                              kLaunchFailed = 719, kNotSupported = 801, kCaptureUnsupported = 900;
inline Context current = nullptr;
inline std::vector<Context> stack;
inline Context allocatedIn = nullptr;
inline bool streamsHaveContexts = true;
inline bool primaryAvailable = true;
inline const auto kPrimary = reinterpret_cast<Context>(0x1000);
inline const auto kStreamContext = reinterpret_cast<Context>(0x2000);
inline const auto kOther = reinterpret_cast<Context>(0x3000);

inline bool capturing = false;            // every stream is being captured into a CUDA graph
inline Stream capturingStream = nullptr;  // this one stream is
inline size_t allocated = 0;  // device memory handed out: allocations follow one another
inline DriverResult isCapturing(Stream stream, CaptureStatus *status) {
  *status = capturing || (stream && stream == capturingStream) ? CaptureStatus::kActive
                                                               : CaptureStatus::kNone;
  return kSuccess;
}
inline DriverResult noModule(Function *) { return kNotSupported; }
inline const auto kGraph = reinterpret_cast<Graph>(0x6000);
inline Graph captureGraph = kGraph;  // the graph a capture under way captures into
inline DriverResult captureInfo(Stream, CaptureStatus *status, Graph *graph) {
  *status = capturing ? CaptureStatus::kActive : CaptureStatus::kNone;
  *graph = capturing ? captureGraph : nullptr;
  return kSuccess;
}
inline DriverResult getCurrent(Context *context) {
  *context = current;
  return kSuccess;
}
inline DriverResult push(Context context) {
  stack.push_back(current);
  current = context;
  return kSuccess;
}
inline DriverResult pop(Context *context) {
  *context = current;
  current = stack.back();
  stack.pop_back();
  return kSuccess;
}
inline DriverResult streamContext(Stream, Context *context) {
  *context = streamsHaveContexts ? kStreamContext : nullptr;
  return streamsHaveContexts ? kSuccess : kInvalidContext;
}
inline DriverResult deviceGet(Device *device, int ordinal) {
  *device = ordinal;
  return kSuccess;
}
inline DriverResult retainPrimary(Context *context, Device) {
  *context = primaryAvailable ? kPrimary : nullptr;
  return primaryAvailable ? kSuccess : kNotInitialized;
}
inline DriverResult contextDevice(Device *device) {
  *device = 0;
  return current ? kSuccess : kInvalidContext;
}
inline DriverResult clockRate(int *value, Device) {
  *value = 1980000;
  return kSuccess;
}
inline CaptureMode captureMode = CaptureMode::kGlobal;  // the calling thread's
inline size_t allocationsInGlobalMode = 0;
inline bool outOfMemory = false;
inline DriverResult memAlloc(DevicePtr *ptr, size_t bytes) {
  if (!current) return kInvalidContext;
  if (outOfMemory) return kOutOfMemory;
  if (captureMode == CaptureMode::kGlobal) ++allocationsInGlobalMode;
  allocatedIn = current;
  *ptr = 0x100000 + allocated;
  allocated += bytes;
  return kSuccess;
}
// Device memory: what was allocated from 0x100000 on (the ring, then its graph arena) is this
// vector, as far as it reaches.
inline std::vector<uint8_t> ringMemory;
inline DriverResult memset(DevicePtr at, unsigned char value, size_t bytes) {
  if (!current) return kInvalidContext;
  if (at >= 0x100000 && at - 0x100000 + bytes <= ringMemory.size())
    std::memset(ringMemory.data() + (at - 0x100000), value, bytes);
  return kSuccess;
}
inline bool memsetFails = false;
inline size_t syncMemsets = 0;  // on the legacy stream, which waits for every blocking stream
inline DriverResult memsetAsync(DevicePtr at, unsigned char value, size_t bytes, Stream stream) {
  if (isLegacyStream(stream)) ++syncMemsets;
  return memsetFails ? kLaunchFailed : memset(at, value, bytes);
}
inline size_t asyncCopies = 0;
inline DriverResult copyAsync(DevicePtr to, DevicePtr from, size_t bytes, Stream) {
  ++asyncCopies;
  if (!current || to < 0x100000 || from < 0x100000 || to - 0x100000 + bytes > ringMemory.size() ||
      from - 0x100000 + bytes > ringMemory.size())
    return kInvalidValue;
  std::memmove(ringMemory.data() + (to - 0x100000), ringMemory.data() + (from - 0x100000), bytes);
  return kSuccess;
}
inline std::vector<size_t> copiedBytes;
inline size_t legacyCopies = 0;  // copies to or from the host on the legacy stream
inline DriverResult copyBackAsync(void *host, DevicePtr from, size_t bytes, Stream stream) {
  if (isLegacyStream(stream)) ++legacyCopies;
  if (!current || from < 0x100000 || from - 0x100000 + bytes > ringMemory.size())
    return kInvalidValue;
  std::memcpy(host, ringMemory.data() + (from - 0x100000), bytes);
  copiedBytes.push_back(bytes);
  return kSuccess;
}
// Rows of a unit-strided slot, as a drain reads back trace units' written parts.
inline DriverResult copyBack2DAsync(void *to, size_t toPitch, DevicePtr from, size_t fromPitch,
                                    size_t width, size_t height, Stream stream) {
  if (isLegacyStream(stream)) ++legacyCopies;
  if (!current || width > fromPitch || width > toPitch || from < 0x100000 ||
      from - 0x100000 + fromPitch * height > ringMemory.size())
    return kInvalidValue;
  for (size_t row = 0; row < height; ++row)
    std::memcpy(static_cast<uint8_t *>(to) + row * toPitch,
                ringMemory.data() + (from - 0x100000) + row * fromPitch, width);
  copiedBytes.push_back(width * height);
  return kSuccess;
}
// The calling thread's capture mode at each synchronisation (context, stream or event).
inline std::vector<CaptureMode> modesAtSync;
inline size_t contextSyncs = 0;
inline DriverResult synchronize() {
  modesAtSync.push_back(captureMode);
  ++contextSyncs;
  return current ? kSuccess : kInvalidContext;
}
inline size_t ownStreams = 0;  // created by Proton
inline DriverResult exchangeMode(CaptureMode *mode) {
  std::swap(captureMode, *mode);
  return kSuccess;
}
inline const auto kOwnStream = reinterpret_cast<Stream>(0x9000);
inline DriverResult streamCreate(Stream *stream, unsigned int flags) {
  if (!current || flags != kStreamNonBlocking) return kInvalidValue;
  *stream = kOwnStream;
  ++ownStreams;
  return kSuccess;
}
inline std::vector<Stream> syncedStreams;   // the program's streams waited for, in order
inline Stream unwaitableStream = nullptr;   // waiting for it fails (it joined a capture)
inline std::function<void()> onStreamSync;  // run inside every stream wait (a test's probe)
inline DriverResult streamSync(Stream stream) {
  if (onStreamSync) onStreamSync();
  modesAtSync.push_back(captureMode);
  if (stream != kOwnStream) syncedStreams.push_back(stream);
  return stream && stream == unwaitableStream ? kCaptureUnsupported : kSuccess;
}
inline Stream blockingStream = nullptr;  // made without kStreamNonBlocking
inline DriverResult streamFlags(Stream stream, unsigned int *flags) {
  *flags = stream == blockingStream ? 0u : kStreamNonBlocking;
  return kSuccess;
}
// Events: handles from 0xE000 on, where each was recorded, which were waited for.
inline size_t eventsMade = 0;
inline std::vector<std::pair<Event, Stream>> recordedEvents;
inline std::vector<Event> syncedEvents;
inline DriverResult eventCreate(Event *event, unsigned int) {
  if (!current) return kInvalidContext;
  *event = reinterpret_cast<Event>(0xE000 + eventsMade++);
  return kSuccess;
}
inline bool eventRecordFails = false;
inline DriverResult eventRecord(Event event, Stream stream) {
  if (eventRecordFails) return kInvalidHandle;
  recordedEvents.emplace_back(event, stream);
  return kSuccess;
}
inline DriverResult eventSync(Event event) {
  modesAtSync.push_back(captureMode);
  syncedEvents.push_back(event);
  return kSuccess;
}
inline std::vector<std::pair<Stream, Event>> streamWaits;  // (stream, event it waits for)
inline DriverResult streamWaitEvent(Stream stream, Event event, unsigned int) {
  streamWaits.emplace_back(stream, event);
  return kSuccess;
}
inline DriverResult memFree(DevicePtr) { return kSuccess; }

inline Driver driver() {
  Driver d;
  d.streamIsCapturing = isCapturing;
  d.ctxGetCurrent = getCurrent;
  d.ctxPushCurrent = push;
  d.ctxPopCurrent = pop;
  d.streamGetCtx = streamContext;
  d.deviceGet = deviceGet;
  d.devicePrimaryCtxRetain = retainPrimary;
  d.ctxGetDevice = contextDevice;
  d.deviceClockRateKhz = clockRate;
  d.memAlloc = memAlloc;
  d.memcpyDtoHAsync = copyBackAsync;
  d.memcpy2DDtoHAsync = copyBack2DAsync;
  d.ctxSynchronize = synchronize;
  d.loadTreeReduce = noModule;  // sums are added up on the host
  d.streamGetCaptureInfo = captureInfo;
  d.memcpyDtoDAsync = copyAsync;
  d.memsetD8Async = memsetAsync;
  d.exchangeCaptureMode = exchangeMode;
  d.streamCreate = streamCreate;
  d.streamSynchronize = streamSync;
  d.eventCreate = eventCreate;
  d.eventRecord = eventRecord;
  d.eventSynchronize = eventSync;
  d.streamWaitEvent = streamWaitEvent;
  d.streamGetFlags = streamFlags;
  d.memFree = memFree;
  return d;
}

// Proton's GPU tree reduction (tree_reduce.cu), run as its host twin: for each descriptor
// { slot address, bytes } at `descs`, the reduced slot at out + i * kReducedTreeBytes.
inline size_t reductions = 0;  // launches of it
inline const auto kReduceFunction = reinterpret_cast<Function>(0xAEDC);
inline DriverResult loadReduce(Function *function) {
  *function = kReduceFunction;
  return kSuccess;
}
inline uint8_t *deviceBytes(DevicePtr at, size_t bytes) {
  if (at < 0x100000 || at - 0x100000 + bytes > ringMemory.size()) return nullptr;
  return ringMemory.data() + (at - 0x100000);
}
inline DriverResult copyInAsync(DevicePtr to, const void *host, size_t bytes, Stream stream) {
  if (isLegacyStream(stream)) ++legacyCopies;
  uint8_t *device = current ? deviceBytes(to, bytes) : nullptr;
  if (!device) return kInvalidValue;
  std::memcpy(device, host, bytes);
  return kSuccess;
}
inline DriverResult launch(Function function, unsigned blocks, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, Stream, void **args, void **) {
  if (function != kReduceFunction || !current) return kInvalidValue;
  ++reductions;
  DevicePtr descs = *static_cast<DevicePtr *>(args[0]);
  DevicePtr out = *static_cast<DevicePtr *>(args[1]);
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  for (unsigned i = 0; i < blocks; ++i) {
    uint64_t desc[2];
    const uint8_t *at = deviceBytes(descs + 16 * i, 16);
    uint8_t *reduced = deviceBytes(out + kOut * i, kOut);
    if (!at || !reduced) return kInvalidValue;
    std::memcpy(desc, at, 16);
    const uint8_t *slot = deviceBytes(desc[0], desc[1]);
    if (!slot) return kInvalidValue;
    instrumentation::reduceTreeSlot(slot, desc[1], reduced);
  }
  return kSuccess;
}
// A one-warp tree kernel with scopes "" and "body" ran into its slot at device address
// `ptr`: kernel 100 cycles, "body" 30 in 2 runs. False: `ptr` is not device memory.
inline bool oneWarpTreeRan(uint32_t hash, uint32_t unitBytes, uint64_t ptr) {
  uint8_t *slot = deviceBytes(ptr, 64);
  if (!slot) return false;
  uint32_t header[4] = {hash, unitBytes, 1, 0}, record[4] = {0, 0, 1, 0};
  uint64_t kernelCycles = 100, bodyCycles = 30;
  uint32_t kernelCount[2] = {1, 1}, bodyCount[2] = {2, 1};
  std::memcpy(slot, header, 16);
  std::memcpy(slot + 16, record, 16);
  std::memcpy(slot + 32, &kernelCycles, 8);
  std::memcpy(slot + 40, kernelCount, 8);
  std::memcpy(slot + 48, &bodyCycles, 8);
  std::memcpy(slot + 56, bodyCount, 8);
  return true;
}
// driver(), with the GPU tree reduction loadable.
inline Driver driverWithReduction() {
  Driver d = driver();
  d.loadTreeReduce = loadReduce;
  d.memcpyHtoDAsync = copyInAsync;
  d.launchKernel = launch;
  return d;
}

inline void reset(Context now) {
  current = now;
  stack.clear();
  allocatedIn = nullptr;
  allocated = 0;
  asyncCopies = 0;
  capturing = outOfMemory = memsetFails = false;
  capturingStream = unwaitableStream = blockingStream = nullptr;
  eventRecordFails = false;
  captureMode = CaptureMode::kGlobal;
  allocationsInGlobalMode = syncMemsets = ownStreams = reductions = legacyCopies = 0;
  contextSyncs = eventsMade = 0;
  modesAtSync.clear();
  onStreamSync = nullptr;
  syncedStreams.clear();
  syncedEvents.clear();
  recordedEvents.clear();
  streamWaits.clear();
  captureGraph = kGraph;
  streamsHaveContexts = primaryAvailable = true;
}
}  // namespace fake

// A one-warp tree kernel with one scope of its own, "body" (as oneWarpTreeRan writes it).
inline instrumentation::ScopeTable oneWarpTreeTable(const char *kernel, uint32_t hash) {
  instrumentation::ScopeTable table;
  table.kernel = kernel;
  table.hash = hash;
  table.paths = {"", "body"};
  table.numWarps = table.unitWarps = table.unitsPerCta = 1;
  table.unitBytes = instrumentation::kTreeUnitHeaderBytes + 2 * instrumentation::kTreeScopeBytes;
  return table;
}

// Buffers recording for one user into 1 MB rings, through `driver` (which outlives them).
inline void startRecording(IntraKernelBuffers &buffers, const Driver &driver,
                           uint64_t maxTraceEvents = 0, uint32_t traceCapacity = 256) {
  buffers.setDriver(&driver);
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, maxTraceEvents, traceCapacity);
}

}  // namespace proton::gpu
