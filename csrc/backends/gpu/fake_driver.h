// A CUDA driver with no GPU, for the tests of IntraKernelBuffers: contexts are tags, device
// memory is a host vector, and Proton's GPU tree reduction runs as reduceTreeSlot() does on
// the host; and what those tests read their sessions with. Test-only; one copy of its state
// for the test binary (inline variables).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backends/cupti/cupti_loader.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/instrumentation/intra_decoder.h"
#include "core/session.h"
#include "core/string_table.h"

namespace proton::cupti {

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
// context that was current when they were made.
namespace fake {
inline CUcontext current = nullptr;
inline std::vector<CUcontext> stack;
inline CUcontext allocatedIn = nullptr;
inline bool streamsHaveContexts = true;
inline bool primaryAvailable = true;
inline const auto kPrimary = reinterpret_cast<CUcontext>(0x1000);
inline const auto kStreamContext = reinterpret_cast<CUcontext>(0x2000);
inline const auto kOther = reinterpret_cast<CUcontext>(0x3000);

inline bool capturing = false;              // every stream is being captured into a CUDA graph
inline CUstream capturingStream = nullptr;  // this one stream is
inline size_t allocated = 0;  // device memory handed out: allocations follow one another
inline CUresult isCapturing(CUstream stream, CUstreamCaptureStatus *status) {
  *status = capturing || (stream && stream == capturingStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                               : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
inline CUresult noModule(CUmodule *, const void *) { return CUDA_ERROR_NOT_SUPPORTED; }
inline const auto kGraph = reinterpret_cast<CUgraph>(0x6000);
inline CUgraph captureGraph = kGraph;  // the graph a capture under way captures into
inline CUresult captureInfo(CUstream, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                            const CUgraphNode **, size_t *) {
  *status = capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  *id = 1;
  *graph = capturing ? captureGraph : nullptr;
  return CUDA_SUCCESS;
}
inline CUresult getCurrent(CUcontext *context) {
  *context = current;
  return CUDA_SUCCESS;
}
inline CUresult push(CUcontext context) {
  stack.push_back(current);
  current = context;
  return CUDA_SUCCESS;
}
inline CUresult pop(CUcontext *context) {
  *context = current;
  current = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}
inline CUresult streamContext(CUstream, CUcontext *context) {
  *context = streamsHaveContexts ? kStreamContext : nullptr;
  return streamsHaveContexts ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
inline CUresult deviceGet(CUdevice *device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
inline CUresult retainPrimary(CUcontext *context, CUdevice) {
  *context = primaryAvailable ? kPrimary : nullptr;
  return primaryAvailable ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
inline CUresult contextDevice(CUdevice *device) {
  *device = 0;
  return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
inline CUresult attribute(int *value, CUdevice_attribute, CUdevice) {
  *value = 1980000;
  return CUDA_SUCCESS;
}
inline CUstreamCaptureMode captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // the calling thread's
inline size_t allocationsInGlobalMode = 0;
inline bool outOfMemory = false;
inline CUresult memAlloc(CUdeviceptr *ptr, size_t bytes) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (outOfMemory) return CUDA_ERROR_OUT_OF_MEMORY;
  if (captureMode == CU_STREAM_CAPTURE_MODE_GLOBAL) ++allocationsInGlobalMode;
  allocatedIn = current;
  *ptr = 0x100000 + allocated;
  allocated += bytes;
  return CUDA_SUCCESS;
}
// Device memory: what was allocated from 0x100000 on (the ring, then its graph arena) is this
// vector, as far as it reaches.
inline std::vector<uint8_t> ringMemory;
inline CUresult memset(CUdeviceptr at, unsigned char value, size_t bytes) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (at >= 0x100000 && at - 0x100000 + bytes <= ringMemory.size())
    std::memset(ringMemory.data() + (at - 0x100000), value, bytes);
  return CUDA_SUCCESS;
}
inline bool memsetFails = false;
inline CUresult memsetAsync(CUdeviceptr at, unsigned char value, size_t bytes, CUstream) {
  return memsetFails ? CUDA_ERROR_LAUNCH_FAILED : memset(at, value, bytes);
}
inline size_t syncMemsets = 0;  // on the legacy stream
inline CUresult syncMemset(CUdeviceptr at, unsigned char value, size_t bytes) {
  ++syncMemsets;
  return memset(at, value, bytes);
}
inline size_t asyncCopies = 0;
inline CUresult copyAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream) {
  ++asyncCopies;
  if (!current || to < 0x100000 || from < 0x100000 || to - 0x100000 + bytes > ringMemory.size() ||
      from - 0x100000 + bytes > ringMemory.size())
    return CUDA_ERROR_INVALID_VALUE;
  std::memmove(ringMemory.data() + (to - 0x100000), ringMemory.data() + (from - 0x100000), bytes);
  return CUDA_SUCCESS;
}
inline std::vector<size_t> copiedBytes;
inline size_t legacyCopies = 0;  // synchronous copies: on the legacy stream
inline CUresult copyBackAsync(void *host, CUdeviceptr from, size_t bytes, CUstream) {
  if (!current || from < 0x100000 || from - 0x100000 + bytes > ringMemory.size())
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(host, ringMemory.data() + (from - 0x100000), bytes);
  copiedBytes.push_back(bytes);
  return CUDA_SUCCESS;
}
inline CUresult copyBack(void *host, CUdeviceptr from, size_t bytes) {
  ++legacyCopies;
  return copyBackAsync(host, from, bytes, nullptr);
}
// Rows of a unit-strided slot, as a drain reads back trace units' written parts.
inline CUresult copyBack2DAsync(const CUDA_MEMCPY2D *c, CUstream) {
  if (!current || c->srcMemoryType != CU_MEMORYTYPE_DEVICE ||
      c->dstMemoryType != CU_MEMORYTYPE_HOST || c->WidthInBytes > c->srcPitch ||
      c->WidthInBytes > c->dstPitch || c->srcDevice < 0x100000 ||
      c->srcDevice - 0x100000 + c->srcPitch * c->Height > ringMemory.size())
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t row = 0; row < c->Height; ++row)
    std::memcpy(static_cast<uint8_t *>(c->dstHost) + row * c->dstPitch,
                ringMemory.data() + (c->srcDevice - 0x100000) + row * c->srcPitch, c->WidthInBytes);
  copiedBytes.push_back(c->WidthInBytes * c->Height);
  return CUDA_SUCCESS;
}
inline CUresult copyBack2D(const CUDA_MEMCPY2D *c) {
  ++legacyCopies;
  return copyBack2DAsync(c, nullptr);
}
// The calling thread's capture mode at each synchronisation (context, stream or event).
inline std::vector<CUstreamCaptureMode> modesAtSync;
inline size_t contextSyncs = 0;
inline CUresult synchronize() {
  modesAtSync.push_back(captureMode);
  ++contextSyncs;
  return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
inline size_t ownStreams = 0;  // created by Proton
inline CUresult exchangeMode(CUstreamCaptureMode *mode) {
  std::swap(captureMode, *mode);
  return CUDA_SUCCESS;
}
inline const auto kOwnStream = reinterpret_cast<CUstream>(0x9000);
inline CUresult streamCreate(CUstream *stream, unsigned int flags) {
  if (!current || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *stream = kOwnStream;
  ++ownStreams;
  return CUDA_SUCCESS;
}
inline std::vector<CUstream> syncedStreams;  // the program's streams waited for, in order
inline CUstream unwaitableStream = nullptr;  // waiting for it fails (it joined a capture)
inline CUresult streamSync(CUstream stream) {
  modesAtSync.push_back(captureMode);
  if (stream != kOwnStream) syncedStreams.push_back(stream);
  return stream && stream == unwaitableStream ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                                              : CUDA_SUCCESS;
}
inline CUstream blockingStream = nullptr;  // made without CU_STREAM_NON_BLOCKING
inline CUresult streamFlags(CUstream stream, unsigned int *flags) {
  *flags = stream == blockingStream ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
  return CUDA_SUCCESS;
}
// Events: handles from 0xE000 on, where each was recorded, which were waited for.
inline size_t eventsMade = 0;
inline std::vector<std::pair<CUevent, CUstream>> recordedEvents;
inline std::vector<CUevent> syncedEvents;
inline CUresult eventCreate(CUevent *event, unsigned int) {
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  *event = reinterpret_cast<CUevent>(0xE000 + eventsMade++);
  return CUDA_SUCCESS;
}
inline bool eventRecordFails = false;
inline CUresult eventRecord(CUevent event, CUstream stream) {
  if (eventRecordFails) return CUDA_ERROR_INVALID_HANDLE;
  recordedEvents.emplace_back(event, stream);
  return CUDA_SUCCESS;
}
inline CUresult eventSync(CUevent event) {
  modesAtSync.push_back(captureMode);
  syncedEvents.push_back(event);
  return CUDA_SUCCESS;
}
inline std::vector<std::pair<CUstream, CUevent>> streamWaits;  // (stream, event it waits for)
inline CUresult streamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  streamWaits.emplace_back(stream, event);
  return CUDA_SUCCESS;
}
inline CUresult memFree(CUdeviceptr) { return CUDA_SUCCESS; }

inline CudaDriverApi driver() {
  CudaDriverApi d;
  d.streamIsCapturing = isCapturing;
  d.ctxGetCurrent = getCurrent;
  d.ctxPushCurrent = push;
  d.ctxPopCurrent = pop;
  d.streamGetCtx = streamContext;
  d.deviceGet = deviceGet;
  d.devicePrimaryCtxRetain = retainPrimary;
  d.ctxGetDevice = contextDevice;
  d.deviceGetAttribute = attribute;
  d.memAlloc = memAlloc;
  d.memsetD8 = syncMemset;
  d.memcpyDtoH = copyBack;
  d.memcpy2D = copyBack2D;
  d.memcpyDtoHAsync = copyBackAsync;
  d.memcpy2DAsync = copyBack2DAsync;
  d.ctxSynchronize = synchronize;
  d.moduleLoadData = noModule;  // sums are added up on the host
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
inline const auto kReduceFunction = reinterpret_cast<CUfunction>(0xAEDC);
inline CUresult loadModule(CUmodule *module, const void *) {
  *module = reinterpret_cast<CUmodule>(0xA0D);
  return CUDA_SUCCESS;
}
inline CUresult getFunction(CUfunction *function, CUmodule, const char *name) {
  *function = kReduceFunction;
  return std::strcmp(name, "proton_tree_reduce") == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
inline uint8_t *deviceBytes(CUdeviceptr at, size_t bytes) {
  if (at < 0x100000 || at - 0x100000 + bytes > ringMemory.size()) return nullptr;
  return ringMemory.data() + (at - 0x100000);
}
inline CUresult copyInAsync(CUdeviceptr to, const void *host, size_t bytes, CUstream) {
  uint8_t *device = current ? deviceBytes(to, bytes) : nullptr;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(device, host, bytes);
  return CUDA_SUCCESS;
}
inline CUresult copyIn(CUdeviceptr to, const void *host, size_t bytes) {
  ++legacyCopies;
  return copyInAsync(to, host, bytes, nullptr);
}
inline CUresult launch(CUfunction function, unsigned blocks, unsigned, unsigned, unsigned, unsigned,
                       unsigned, unsigned, CUstream, void **args, void **) {
  if (function != kReduceFunction || !current) return CUDA_ERROR_INVALID_VALUE;
  ++reductions;
  CUdeviceptr descs = *static_cast<CUdeviceptr *>(args[0]);
  CUdeviceptr out = *static_cast<CUdeviceptr *>(args[1]);
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  for (unsigned i = 0; i < blocks; ++i) {
    uint64_t desc[2];
    const uint8_t *at = deviceBytes(descs + 16 * i, 16);
    uint8_t *reduced = deviceBytes(out + kOut * i, kOut);
    if (!at || !reduced) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(desc, at, 16);
    const uint8_t *slot = deviceBytes(desc[0], desc[1]);
    if (!slot) return CUDA_ERROR_INVALID_VALUE;
    instrumentation::reduceTreeSlot(slot, desc[1], reduced);
  }
  return CUDA_SUCCESS;
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
inline CudaDriverApi driverWithReduction() {
  CudaDriverApi d = driver();
  d.moduleLoadData = loadModule;
  d.moduleGetFunction = getFunction;
  d.memcpyHtoD = copyIn;
  d.memcpyHtoDAsync = copyInAsync;
  d.launchKernel = launch;
  return d;
}

inline void reset(CUcontext now) {
  current = now;
  stack.clear();
  allocatedIn = nullptr;
  allocated = 0;
  asyncCopies = 0;
  capturing = outOfMemory = memsetFails = false;
  capturingStream = unwaitableStream = blockingStream = nullptr;
  eventRecordFails = false;
  captureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  allocationsInGlobalMode = syncMemsets = ownStreams = reductions = legacyCopies = 0;
  contextSyncs = eventsMade = 0;
  modesAtSync.clear();
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
inline void startRecording(IntraKernelBuffers &buffers, const CudaDriverApi &driver,
                           uint64_t maxTraceEvents = 0, uint32_t traceCapacity = 256) {
  buffers.setDriver(&driver);
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, maxTraceEvents, traceCapacity);
}

}  // namespace proton::cupti
