// A native program with proton/instrument.cuh scopes, profiled by `proton -b instrumentation
// ./scoped_app [reset|capture]`: 10 launches of 64 CTAs of 4 warps. `reset` then resets the
// device (the CUDA samples' idiom) and launches 5 more in the device's new context. `capture`
// first captures 2 launches into a CUDA graph (the kernel's first launches, so Proton sets up
// its module during the capture) on a blocking stream in global mode, and replays it 3 times.
// `contexts` launches its 10 inside the NVTX range "primary", then makes a second context on
// the same GPU and launches 5 more there inside "second": each range must hold its own
// launches' scopes (they are matched by context and grid id). `cooperative` makes its 10
// launches with cudaLaunchCooperativeKernel. Built with -rdc=true -DSCOPED_APP_RDC together
// with scoped_app_part.cu, `rdc` also launches that unit's kernel 5 times: both units' scopes
// record through the one control global of the module they are linked into.
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstring>
#include <proton/instrument.cuh>

__global__ void scaled(float *x, int n) {
  PROTON_SCOPE("body");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

#ifdef SCOPED_APP_RDC
int runPart(int launches);  // scoped_app_part.cu
#endif

static bool cooperative = false;

static int run(int launches) {
  float *x = nullptr;
  if (cudaMalloc(&x, 64 * 128 * sizeof(float)) != cudaSuccess) return 1;
  int n = 64 * 128;
  void *args[] = {&x, &n};
  for (int i = 0; i < launches; ++i) {
    if (cooperative)
      cudaLaunchCooperativeKernel((const void *)scaled, dim3(64), dim3(128), args, 0, nullptr);
    else
      scaled<<<64, 128>>>(x, n);
  }
  cudaError_t e = cudaDeviceSynchronize();
  cudaFree(x);
  return e == cudaSuccess ? 0 : 1;
}

static int captured(int replays) {
  float *x = nullptr;
  cudaStream_t stream = nullptr;  // blocking: the legacy stream waits for it
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaMalloc(&x, 64 * 128 * sizeof(float)) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess ||
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess)
    return 1;
  for (int i = 0; i < 2; ++i) scaled<<<64, 128, 0, stream>>>(x, 64 * 128);
  cudaError_t e = cudaStreamEndCapture(stream, &graph);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; i < replays && e == cudaSuccess; ++i) e = cudaGraphLaunch(exec, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) std::printf("capture: %s\n", cudaGetErrorString(e));
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(x);
  return e == cudaSuccess ? 0 : 1;
}

// 5 launches in a second context of device 0, made current (the runtime then uses it).
static int inSecondContext() {
  CUdevice device = 0;
  CUcontext second = nullptr;
  if (cuDeviceGet(&device, 0) != CUDA_SUCCESS) return 1;
#if CUDA_VERSION >= 13000
  if (cuCtxCreate(&second, nullptr, 0, device) != CUDA_SUCCESS) return 1;
#else
  if (cuCtxCreate(&second, 0, device) != CUDA_SUCCESS) return 1;
#endif
  nvtxRangePushA("second");
  int failed = run(5);
  nvtxRangePop();
  CUcontext popped = nullptr;
  cuCtxPopCurrent(&popped);
  return failed;  // the context stays until the program ends: its events are read at exit
}

int main(int argc, char **argv) {
  const bool contexts = argc > 1 && std::strcmp(argv[1], "contexts") == 0;
  cooperative = argc > 1 && std::strcmp(argv[1], "cooperative") == 0;
  int failed = argc > 1 && std::strcmp(argv[1], "capture") == 0 ? captured(3) : 0;
  // NVTX calls are seen from the session's start on, which comes with CUDA's (README, NVTX).
  if (contexts) failed |= cudaFree(nullptr) != cudaSuccess;
  if (contexts) nvtxRangePushA("primary");
  failed |= run(10);
  if (contexts) {
    nvtxRangePop();
    failed |= inSecondContext();
  }
  if (argc > 1 && std::strcmp(argv[1], "reset") == 0) {
    failed |= cudaDeviceReset() != cudaSuccess;
    failed |= run(5);
  }
#ifdef SCOPED_APP_RDC
  if (argc > 1 && std::strcmp(argv[1], "rdc") == 0) failed |= runPart(5);
#endif
  std::printf("done %d\n", failed);
  return failed;
}
