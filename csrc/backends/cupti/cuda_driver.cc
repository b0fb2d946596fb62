#include "backends/cupti/cuda_driver.h"

#include <atomic>
#include <type_traits>

#include "backends/cupti/cupti_graphs.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

// The GPU tree reduction (tree_reduce.cu), as PTX.
constexpr const char *kTreeReducePtx =
#include "backends/cupti/tree_reduce_ptx.inc"
    ;

// The neutral values are CUDA's (gpu_driver.h).
static_assert(sizeof(gpu::DevicePtr) == sizeof(CUdeviceptr));
static_assert(static_cast<int>(gpu::CaptureStatus::kNone) == CU_STREAM_CAPTURE_STATUS_NONE &&
              static_cast<int>(gpu::CaptureStatus::kActive) == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
              static_cast<int>(gpu::CaptureStatus::kInvalidated) ==
                  CU_STREAM_CAPTURE_STATUS_INVALIDATED);
static_assert(static_cast<int>(gpu::CaptureMode::kGlobal) == CU_STREAM_CAPTURE_MODE_GLOBAL &&
              static_cast<int>(gpu::CaptureMode::kThreadLocal) ==
                  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
              static_cast<int>(gpu::CaptureMode::kRelaxed) == CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(gpu::kStreamNonBlocking == CU_STREAM_NON_BLOCKING &&
              gpu::kEventDisableTiming == CU_EVENT_DISABLE_TIMING);

std::atomic<const CudaDriverApi *> gCuda{nullptr};  // the process's CUDA driver
const CudaDriverApi &cuda() { return *gCuda.load(std::memory_order_acquire); }

// One side's value as the other's: a handle keeps its address (kLegacyStream is
// CU_STREAM_LEGACY), an enum or a device address its value.
template <class To, class From>
To as(From from) {
  if constexpr (std::is_pointer_v<To>)
    return reinterpret_cast<To>(from);
  else
    return static_cast<To>(from);
}

// A CUDA out-parameter for a neutral one: what the call wrote is the caller's once it returns.
template <class Cuda, class Neutral>
class Out {
 public:
  explicit Out(Neutral *to) : to_(to) {
    if constexpr (!std::is_pointer_v<Cuda>) value_ = as<Cuda>(*to);  // a handle starts null
  }
  ~Out() { *to_ = as<Neutral>(value_); }
  operator Cuda *() { return &value_; }

 private:
  Neutral *to_;
  Cuda value_{};
};
template <class Cuda, class Neutral>
Out<Cuda, Neutral> out(Neutral *to) {
  return Out<Cuda, Neutral>(to);
}

CUstream cu(gpu::Stream stream) { return as<CUstream>(stream); }

gpu::Driver make() {
  gpu::Driver d;
  d.ctxGetCurrent = [](gpu::Context *c) -> int { return cuda().ctxGetCurrent(out<CUcontext>(c)); };
  d.ctxPushCurrent = [](gpu::Context c) -> int { return cuda().ctxPushCurrent(as<CUcontext>(c)); };
  d.ctxPopCurrent = [](gpu::Context *c) -> int { return cuda().ctxPopCurrent(out<CUcontext>(c)); };
  d.ctxSynchronize = []() -> int { return cuda().ctxSynchronize(); };
  d.ctxGetDevice = [](gpu::Device *device) -> int { return cuda().ctxGetDevice(device); };
  d.deviceGet = [](gpu::Device *device, int n) -> int { return cuda().deviceGet(device, n); };
  d.devicePrimaryCtxRetain = [](gpu::Context *c, gpu::Device device) -> int {
    return cuda().devicePrimaryCtxRetain(out<CUcontext>(c), device);
  };
  d.deviceClockRateKhz = [](int *khz, gpu::Device device) -> int {
    return cuda().deviceGetAttribute(khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device);
  };
  d.pointerGetContext = [](gpu::Context *c, gpu::DevicePtr ptr) -> int {
    return cuda().pointerGetAttribute(out<CUcontext>(c), CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
  };
  d.memAlloc = [](gpu::DevicePtr *p, size_t n) -> int {
    return cuda().memAlloc(out<CUdeviceptr>(p), n);
  };
  d.memFree = [](gpu::DevicePtr p) -> int { return cuda().memFree(p); };
  d.memsetD8Async = [](gpu::DevicePtr at, unsigned char v, size_t n, gpu::Stream s) -> int {
    return cuda().memsetD8Async(at, v, n, cu(s));
  };
  d.memcpyHtoDAsync = [](gpu::DevicePtr to, const void *from, size_t n, gpu::Stream s) -> int {
    return cuda().memcpyHtoDAsync(to, from, n, cu(s));
  };
  d.memcpyDtoHAsync = [](void *to, gpu::DevicePtr from, size_t n, gpu::Stream s) -> int {
    return cuda().memcpyDtoHAsync(to, from, n, cu(s));
  };
  d.memcpyDtoDAsync = [](gpu::DevicePtr to, gpu::DevicePtr from, size_t n, gpu::Stream s) -> int {
    return cuda().memcpyDtoDAsync(to, from, n, cu(s));
  };
  d.memcpy2DDtoHAsync = [](void *to, size_t toPitch, gpu::DevicePtr from, size_t fromPitch,
                           size_t width, size_t height, gpu::Stream s) -> int {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = from;
    copy.srcPitch = fromPitch;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = to;
    copy.dstPitch = toPitch;
    copy.WidthInBytes = width;
    copy.Height = height;
    return cuda().memcpy2DAsync(&copy, cu(s));
  };
  d.streamCreate = [](gpu::Stream *s, unsigned flags) -> int {
    return cuda().streamCreate(out<CUstream>(s), flags);
  };
  d.streamSynchronize = [](gpu::Stream s) -> int { return cuda().streamSynchronize(cu(s)); };
  d.streamGetCtx = [](gpu::Stream s, gpu::Context *c) -> int {
    return cuda().streamGetCtx(cu(s), out<CUcontext>(c));
  };
  d.streamGetFlags = [](gpu::Stream s, unsigned *flags) -> int {
    return cuda().streamGetFlags(cu(s), flags);
  };
  d.streamIsCapturing = [](gpu::Stream s, gpu::CaptureStatus *status) -> int {
    return cuda().streamIsCapturing(cu(s), out<CUstreamCaptureStatus>(status));
  };
  if (cuda().streamGetCaptureInfo)
    d.streamGetCaptureInfo = [](gpu::Stream s, gpu::CaptureStatus *status,
                                gpu::Graph *graph) -> int {
      cuuint64_t id = 0;
      return cuda().streamGetCaptureInfo(cu(s), out<CUstreamCaptureStatus>(status), &id,
                                         out<CUgraph>(graph), nullptr, nullptr);
    };
  d.streamWaitEvent = [](gpu::Stream s, gpu::Event e, unsigned flags) -> int {
    return cuda().streamWaitEvent(cu(s), as<CUevent>(e), flags);
  };
  d.exchangeCaptureMode = [](gpu::CaptureMode *mode) -> int {
    return cuda().exchangeCaptureMode(out<CUstreamCaptureMode>(mode));
  };
  d.eventCreate = [](gpu::Event *e, unsigned flags) -> int {
    return cuda().eventCreate(out<CUevent>(e), flags);
  };
  d.eventRecord = [](gpu::Event e, gpu::Stream s) -> int {
    return cuda().eventRecord(as<CUevent>(e), cu(s));
  };
  d.eventSynchronize = [](gpu::Event e) -> int { return cuda().eventSynchronize(as<CUevent>(e)); };
  d.eventDestroy = [](gpu::Event e) -> int { return cuda().eventDestroy(as<CUevent>(e)); };
  d.loadTreeReduce = [](gpu::Function *f) -> int {
    CUmodule module = nullptr;
    CUresult rc = cuda().moduleLoadData(&module, kTreeReducePtx);
    if (rc != CUDA_SUCCESS) return rc;
    return cuda().moduleGetFunction(out<CUfunction>(f), module, "proton_tree_reduce");
  };
  d.launchKernel = [](gpu::Function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shared, gpu::Stream s, void **args,
                      void **extra) -> int {
    InternalLaunchGuard internal;  // not a kernel of the user's: filed in no session
    return cuda().launchKernel(as<CUfunction>(f), gx, gy, gz, bx, by, bz, shared, cu(s), args,
                               extra);
  };
  d.funcGetModule = [](gpu::Module *m, gpu::Function f) -> int {
    return cuda().funcGetModule(out<CUmodule>(m), as<CUfunction>(f));
  };
  d.kernelGetLibrary = [](gpu::Library *l, gpu::Function f) -> int {
    return cuda().kernelGetLibrary(out<CUlibrary>(l), as<CUkernel>(f));
  };
  d.moduleGetGlobal = [](gpu::DevicePtr *p, size_t *n, gpu::Module m, const char *name) -> int {
    return cuda().moduleGetGlobal(out<CUdeviceptr>(p), n, as<CUmodule>(m), name);
  };
  d.libraryGetGlobal = [](gpu::DevicePtr *p, size_t *n, gpu::Library l, const char *name) -> int {
    return cuda().libraryGetGlobal(out<CUdeviceptr>(p), n, as<CUlibrary>(l), name);
  };
  return d;
}

}  // namespace

const gpu::Driver *cudaDriver(const CudaDriverApi *api) {
  gCuda.store(api, std::memory_order_release);
  static const gpu::Driver driver = make();  // which optional functions it has: the first's
  return &driver;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
