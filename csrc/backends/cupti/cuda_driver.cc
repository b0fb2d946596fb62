#include "backends/cupti/cuda_driver.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

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

// Proton's copy of tensor metric values: `bytes` bytes from `from` to `to`, a byte a thread per
// step of a grid-stride loop (values are a few bytes; a vector metric a few thousand).
// Written as PTX by hand (ISA 7.0, sm_70 on, as tree_reduce's); the driver compiles it once
// per context.
//   .entry proton_metric_copy(.u64 to, .u64 from, .u64 bytes)
constexpr const char *kMetricCopyPtx = R"PTX(
.version 7.0
.target sm_70
.address_size 64

.visible .entry proton_metric_copy(
	.param .u64 proton_metric_copy_param_0,
	.param .u64 proton_metric_copy_param_1,
	.param .u64 proton_metric_copy_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b16 	%rs<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<10>;

	ld.param.u64 	%rd1, [proton_metric_copy_param_0];
	ld.param.u64 	%rd2, [proton_metric_copy_param_1];
	ld.param.u64 	%rd3, [proton_metric_copy_param_2];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mul.wide.u32 	%rd4, %r1, %r2;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd4, %rd4, %rd5;
	mul.wide.u32 	%rd6, %r4, %r2;
$L__loop:
	setp.ge.u64 	%p1, %rd4, %rd3;
	@%p1 bra 	$L__done;
	add.s64 	%rd7, %rd2, %rd4;
	ld.global.u8 	%rs1, [%rd7];
	add.s64 	%rd8, %rd1, %rd4;
	st.global.u8 	[%rd8], %rs1;
	add.s64 	%rd4, %rd4, %rd6;
	bra.uni 	$L__loop;
$L__done:
	ret;
}
)PTX";
constexpr unsigned kMetricCopyThreads = 128, kMetricCopyMaxBlocks = 64;

std::atomic<const CudaDriverApi *> gCuda{nullptr};  // the process's CUDA driver
const CudaDriverApi &cuda() { return *gCuda.load(std::memory_order_acquire); }

// proton_metric_copy per context, loaded at its first copy there (in relaxed capture mode: a
// graph may be captured meanwhile, on any thread). A context that could not load it is
// remembered (null), and its copies are the caller's memcpy. One whose function the driver
// no longer knows (a context destroyed, another created at its address) is forgotten, and
// loaded again at its next copy.
struct MetricCopyKernels {
  std::mutex mu;
  std::vector<std::pair<CUcontext, CUfunction>> loaded;
};
MetricCopyKernels &metricCopyKernels() {
  static MetricCopyKernels *kernels = new MetricCopyKernels();  // outlives exit handlers
  return *kernels;
}

CUresult metricCopyFunction(CUcontext context, CUfunction *function) {
  MetricCopyKernels &k = metricCopyKernels();
  std::lock_guard lock(k.mu);
  for (const auto &[c, f] : k.loaded)
    if (c == context) {
      *function = f;
      return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    }
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool relaxed = cuda().exchangeCaptureMode && cuda().exchangeCaptureMode(&mode) == CUDA_SUCCESS;
  CUmodule module = nullptr;
  CUresult rc = cuda().moduleLoadData(&module, kMetricCopyPtx);
  if (rc == CUDA_SUCCESS) rc = cuda().moduleGetFunction(function, module, "proton_metric_copy");
  if (relaxed) cuda().exchangeCaptureMode(&mode);
  if (rc != CUDA_SUCCESS) *function = nullptr;
  k.loaded.emplace_back(context, *function);
  return rc;
}

void forgetMetricCopy(CUcontext context) {
  MetricCopyKernels &k = metricCopyKernels();
  std::lock_guard lock(k.mu);
  std::erase_if(k.loaded, [&](const auto &entry) { return entry.first == context; });
}

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
  d.copyKernelAsync = [](gpu::DevicePtr to, gpu::DevicePtr from, size_t bytes,
                         gpu::Stream s) -> int {
    CUcontext context = nullptr;
    CUfunction function = nullptr;
    if (CUresult rc = cuda().ctxGetCurrent(&context); rc != CUDA_SUCCESS) return rc;
    if (CUresult rc = metricCopyFunction(context, &function); rc != CUDA_SUCCESS) return rc;
    unsigned long long n = bytes;
    void *args[] = {&to, &from, &n};
    size_t blocks = (bytes + kMetricCopyThreads - 1) / kMetricCopyThreads;
    unsigned grid = static_cast<unsigned>(std::clamp<size_t>(blocks, 1, kMetricCopyMaxBlocks));
    // Not an InternalLaunchGuard launch: the core files it as <metric>.
    CUresult rc = cuda().launchKernel(function, grid, 1, 1, kMetricCopyThreads, 1, 1, 0, cu(s),
                                      args, nullptr);
    if (rc == CUDA_ERROR_INVALID_HANDLE) forgetMetricCopy(context);
    return rc;
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
