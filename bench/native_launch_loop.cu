// A launch-bound CUDA C++ loop for bench/native.py: N empty kernels, optionally each inside a
// PROTON_SCOPE, timed on the host (cudaDeviceSynchronize at both ends). Prints one line:
//   launches=<N> seconds=<wall time of the loop>
// argv: N [scoped]
#include <cuda_runtime.h>
#include <proton/proton.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void empty_kernel(int *x) {
  if (x && threadIdx.x == 1024) *x = 0;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 100000;
  bool scoped = argc > 2 && !std::strcmp(argv[2], "scoped");
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 32>>>(nullptr);  // warm-up
  cudaDeviceSynchronize();
  auto begin = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (scoped) {
      PROTON_SCOPE("step");
      empty_kernel<<<1, 32>>>(nullptr);
    } else {
      empty_kernel<<<1, 32>>>(nullptr);
    }
  }
  cudaDeviceSynchronize();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("launches=%ld seconds=%.6f\n", n, seconds);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
