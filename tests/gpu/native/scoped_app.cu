// A native program with proton/instrument.cuh scopes, profiled by `proton -b instrumentation
// ./scoped_app [reset]`: 10 launches of 64 CTAs of 4 warps; with an argument it resets its
// device at the end (the CUDA samples' idiom) and launches 5 more in the device's new context.
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

int main(int argc, char **argv) {
  int failed = run(10);
  if (argc > 1 && std::strcmp(argv[1], "reset") == 0) {
    failed |= cudaDeviceReset() != cudaSuccess;
    failed |= run(5);
  }
  std::printf("done %d\n", failed);
  return failed;
}
