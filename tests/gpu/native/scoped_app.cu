// A native program with proton/instrument.cuh scopes, profiled by `proton -b instrumentation
// ./scoped_app [reset|capture]`: 10 launches of 64 CTAs of 4 warps. `reset` then resets the
// device (the CUDA samples' idiom) and launches 5 more in the device's new context. `capture`
// first captures 2 launches into a CUDA graph (the kernel's first launches, so Proton sets up
// its module during the capture) on a blocking stream in global mode, and replays it 3 times.
#include <cstdio>
#include <cstring>
#include <proton/instrument.cuh>

__global__ void scaled(float *x, int n) {
  PROTON_SCOPE("body");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

static int run(int launches) {
  float *x = nullptr;
  if (cudaMalloc(&x, 64 * 128 * sizeof(float)) != cudaSuccess) return 1;
  for (int i = 0; i < launches; ++i) scaled<<<64, 128>>>(x, 64 * 128);
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

int main(int argc, char **argv) {
  int failed = argc > 1 && std::strcmp(argv[1], "capture") == 0 ? captured(3) : 0;
  failed |= run(10);
  if (argc > 1 && std::strcmp(argv[1], "reset") == 0) {
    failed |= cudaDeviceReset() != cudaSuccess;
    failed |= run(5);
  }
  std::printf("done %d\n", failed);
  return failed;
}
