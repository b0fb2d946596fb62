// gpu::Driver: the GPU driver calls that Proton's device-side logic makes (intra-kernel
// buffers and their drains, graph slots and replay order, device metric buffers, native
// scopes), as a table of functions with vendor-neutral types. A vendor backend fills it from
// its own driver (cupti/cuda_driver.cc from libcuda; a ROCm backend would from libamdhip64);
// the tests fill it with a driver that has no GPU (fake_driver.h).
//
//   const gpu::Driver &driver = cudaDriver(*cudaApi);   // the backend, once at its start
//   IntraKernelBuffers::global().setDriver(&driver);
//   ...
//   gpu::ContextScope scope(driver, context, /*current=*/false);
//   if (scope.ok() && driver.memAlloc(&ptr, bytes) == gpu::kSuccess) ...
//
// The functions mean what the CUDA driver's of the same name mean (cuMemAlloc, cuStreamGetCtx,
// ...; HIP's hipMalloc, hipStreamGetDevice ... are their counterparts); each returns the
// driver's own result code, kSuccess (0) when it succeeded. Handles are the driver's own,
// opaque here. A function marked "optional" may be null (the driver lacks it); every other one
// is set.
//
// Thread-safe as the driver is: the table is immutable once filled.
#pragma once

#include <cstddef>
#include <cstdint>

namespace proton::gpu {

// The driver's handles (CUcontext, CUstream, ... / hipCtx_t, hipStream_t, ...).
using Context = struct ContextHandle *;
using Stream = struct StreamHandle *;
using Event = struct EventHandle *;
using Graph = struct GraphHandle *;          // a graph being captured, or made from one
using GraphExec = struct GraphExecHandle *;  // an executable graph, launched as a whole
using Function = struct FunctionHandle *;    // a kernel
using Module = struct ModuleHandle *;        // code loaded into one context
using Library = struct LibraryHandle *;      // code loaded for every context (CUDA 12+)
using DevicePtr = uint64_t;                  // a device address
using Device = int;                          // a device ordinal
using DriverResult = int;                    // the driver's result code
inline constexpr DriverResult kSuccess = 0;

// The per-device default stream that waits for every blocking stream, and the calling
// thread's own default stream: handles, not streams of their own (CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD; a driver whose handles differ translates them).
inline const Stream kLegacyStream = reinterpret_cast<Stream>(uintptr_t{1});
inline const Stream kPerThreadStream = reinterpret_cast<Stream>(uintptr_t{2});

// Stream capture into a graph, and the calling thread's capture mode (what it may call while
// a capture is under way): the CUDA driver's values.
enum class CaptureStatus { kNone = 0, kActive = 1, kInvalidated = 2 };
enum class CaptureMode { kGlobal = 0, kThreadLocal = 1, kRelaxed = 2 };
// streamCreate's and streamGetFlags' flag: the stream does not wait for the legacy stream.
inline constexpr unsigned kStreamNonBlocking = 0x1;
// eventCreate's flag: an event for ordering only, no time.
inline constexpr unsigned kEventDisableTiming = 0x2;

struct Driver {
  // Contexts and devices.
  DriverResult (*ctxGetCurrent)(Context *context) = nullptr;
  DriverResult (*ctxPushCurrent)(Context context) = nullptr;
  DriverResult (*ctxPopCurrent)(Context *context) = nullptr;
  DriverResult (*ctxSynchronize)() = nullptr;
  DriverResult (*ctxGetDevice)(Device *device) = nullptr;
  DriverResult (*deviceGet)(Device *device, int ordinal) = nullptr;
  DriverResult (*devicePrimaryCtxRetain)(Context *context, Device device) = nullptr;
  DriverResult (*deviceClockRateKhz)(int *khz, Device device) = nullptr;  // SM clock
  // The context that owns the memory at `ptr`.
  DriverResult (*pointerGetContext)(Context *context, DevicePtr ptr) = nullptr;

  // Device memory; copies and clears are enqueued on `stream`.
  DriverResult (*memAlloc)(DevicePtr *ptr, size_t bytes) = nullptr;
  DriverResult (*memFree)(DevicePtr ptr) = nullptr;
  DriverResult (*memsetD8Async)(DevicePtr at, unsigned char value, size_t bytes,
                                Stream stream) = nullptr;
  DriverResult (*memcpyHtoDAsync)(DevicePtr to, const void *from, size_t bytes,
                                  Stream stream) = nullptr;
  DriverResult (*memcpyDtoHAsync)(void *to, DevicePtr from, size_t bytes, Stream stream) = nullptr;
  DriverResult (*memcpyDtoDAsync)(DevicePtr to, DevicePtr from, size_t bytes,
                                  Stream stream) = nullptr;
  // `height` rows of `width` bytes, `fromPitch` apart on the device, `toPitch` apart on the host.
  DriverResult (*memcpy2DDtoHAsync)(void *to, size_t toPitch, DevicePtr from, size_t fromPitch,
                                    size_t width, size_t height, Stream stream) = nullptr;

  // Streams and events.
  DriverResult (*streamCreate)(Stream *stream, unsigned flags) = nullptr;
  DriverResult (*streamSynchronize)(Stream stream) = nullptr;
  DriverResult (*streamGetCtx)(Stream stream, Context *context) = nullptr;
  DriverResult (*streamGetFlags)(Stream stream, unsigned *flags) = nullptr;  // optional
  DriverResult (*streamIsCapturing)(Stream stream, CaptureStatus *status) = nullptr;
  // The graph a capture under way on `stream` captures into. Optional.
  DriverResult (*streamGetCaptureInfo)(Stream stream, CaptureStatus *status,
                                       Graph *graph) = nullptr;
  DriverResult (*streamWaitEvent)(Stream stream, Event event, unsigned flags) = nullptr;  // opt.
  // Swaps the calling thread's capture mode with *mode. Optional.
  DriverResult (*exchangeCaptureMode)(CaptureMode *mode) = nullptr;
  DriverResult (*eventCreate)(Event *event, unsigned flags) = nullptr;
  DriverResult (*eventRecord)(Event event, Stream stream) = nullptr;
  DriverResult (*eventSynchronize)(Event event) = nullptr;
  DriverResult (*eventDestroy)(Event event) = nullptr;  // optional

  // Kernels. Proton's own tree reduction (the vendor's build of it: cupti/tree_reduce.cu),
  // loaded into the current context; its launches are Proton's own, filed in no session.
  DriverResult (*loadTreeReduce)(Function *function) = nullptr;
  DriverResult (*launchKernel)(Function function, unsigned gridX, unsigned gridY, unsigned gridZ,
                               unsigned blockX, unsigned blockY, unsigned blockZ,
                               unsigned sharedBytes, Stream stream, void **args,
                               void **extra) = nullptr;

  // Proton's copy of tensor metric values: `bytes` bytes from `from` to `to`, by a kernel of
  // Proton's own (cupti: proton_metric_copy) launched on `stream` in the current context, and
  // filed like the user's launches: the core names it <metric> where the calling thread's
  // context places it (SessionManager::MetricCopyPlacement). Optional; the caller copies with
  // memcpyDtoDAsync when it is missing or fails.
  DriverResult (*copyKernelAsync)(DevicePtr to, DevicePtr from, size_t bytes,
                                  Stream stream) = nullptr;

  // A kernel's code and its globals (native scopes): the module a kernel belongs to, or the
  // library (optional both) where it is a library's, and the address and size of a global.
  DriverResult (*funcGetModule)(Module *module, Function function) = nullptr;
  DriverResult (*kernelGetLibrary)(Library *library, Function function) = nullptr;  // optional
  DriverResult (*moduleGetGlobal)(DevicePtr *ptr, size_t *bytes, Module module,
                                  const char *name) = nullptr;
  DriverResult (*libraryGetGlobal)(DevicePtr *ptr, size_t *bytes, Library library,
                                   const char *name) = nullptr;  // optional
};

// Relaxed stream-capture mode for the calling thread while it lives: allocating device memory
// (and synchronising a stream of Proton's own) is then legal while a stream captures a graph,
// this thread's or, in global mode, another's. As PyTorch's allocator does.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const Driver &driver) : driver_(driver) {
    if (driver_.exchangeCaptureMode) driver_.exchangeCaptureMode(&mode_);
  }
  ~RelaxedCaptureMode() {
    if (driver_.exchangeCaptureMode) driver_.exchangeCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode &) = delete;
  RelaxedCaptureMode &operator=(const RelaxedCaptureMode &) = delete;

 private:
  const Driver &driver_;
  CaptureMode mode_ = CaptureMode::kRelaxed;  // the thread's, while relaxed
};

// Makes `context` current while it lives, unless it already is (`current`): pushed, and popped
// on every way out.
class ContextScope {
 public:
  ContextScope(const Driver &driver, Context context, bool current)
      : driver_(driver),
        pushed_(!current && driver.ctxPushCurrent(context) == kSuccess),
        ok_(current || pushed_) {}
  ~ContextScope() {
    Context popped = nullptr;
    if (pushed_) driver_.ctxPopCurrent(&popped);
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;
  bool ok() const { return ok_; }

 private:
  const Driver &driver_;
  bool pushed_;
  bool ok_;
};

// The legacy stream and the null stream: never captured, never destroyed.
inline bool isLegacyStream(Stream stream) { return stream == nullptr || stream == kLegacyStream; }

// A stream in a capture (or one that cannot say): it can be neither waited for nor marked.
inline bool streamCapturing(const Driver &driver, Stream stream) {
  CaptureStatus status = CaptureStatus::kNone;
  return !isLegacyStream(stream) &&
         (driver.streamIsCapturing(stream, &status) != kSuccess || status != CaptureStatus::kNone);
}

}  // namespace proton::gpu
