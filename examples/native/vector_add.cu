// A small CUDA C++ program profiled by Proton: two kernels, NVTX ranges and the C++ API.
//
//   proton ./vector_add            # CUDA injection: session 0, written as proton.hatchet
//   ./vector_add --self            # the program starts and finalizes its own session
//   proton-viewer proton.hatchet
//
// What it launches (the GPU tests count these exactly):
//   NVTX "setup":              1 x fill
//   PROTON_SCOPE "iterations"  (with flops and bytes metrics)
//     NVTX "step" (x steps):   1 x vector_add, 1 x scale
//   PROTON_SCOPE "worker" on a second thread: 2 x scale
// argv: [--self] [steps (default 4)] [exit status (default 0)] [--hang (wait for a signal)]
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <proton/proton.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

__global__ void fill(float *x, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void vector_add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void scale(float *x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t err = (call);                                                    \
    if (err != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

int main(int argc, char **argv) {
  bool self = false, hang = false;
  int positional[2] = {4, 0}, npos = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--self"))
      self = true;
    else if (!std::strcmp(argv[i], "--hang"))
      hang = true;
    else if (npos < 2)
      positional[npos++] = std::atoi(argv[i]);
  }
  const int steps = positional[0], status = positional[1];
  const int n = 1 << 20, threads = 256, blocks = (n + threads - 1) / threads;

  // Under `proton ./vector_add` this returns the command line's session 0 and the matching
  // finalize() below does nothing: the launcher writes the profile when the program exits.
  if (self) proton::start("vector_add");

  // CUDA is initialised first: under `proton ./app`, Proton starts at CUDA's initialisation,
  // and an NVTX range opened before that is not seen.
  CHECK(cudaFree(nullptr));
  float *a, *b, *c;
  nvtxRangePushA("setup");
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMalloc(&c, n * sizeof(float)));
  fill<<<blocks, threads>>>(a, 1.0f, n);
  CHECK(cudaMemcpy(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice));
  nvtxRangePop();

  {
    PROTON_SCOPE_METRICS("iterations", {{"flops", 2.0 * n * steps}, {"bytes", 12L * n * steps}});
    for (int s = 0; s < steps; ++s) {
      nvtxRangePushA("step");
      vector_add<<<blocks, threads>>>(a, b, c, n);
      scale<<<blocks, threads>>>(c, 0.5f, n);
      nvtxRangePop();
    }
  }
  std::thread worker([&] {
    PROTON_SCOPE("worker");
    for (int i = 0; i < 2; ++i) scale<<<blocks, threads>>>(a, 2.0f, n);
    CHECK(cudaDeviceSynchronize());
  });
  worker.join();
  CHECK(cudaDeviceSynchronize());

  float host = 0;
  CHECK(cudaMemcpy(&host, c, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("c[0] = %.2f\n", host);  // (1 + 1) * 0.5 = 1.00
  std::fflush(stdout);
  if (hang) {
    std::printf("waiting for a signal\n");
    std::fflush(stdout);
    // pause() returns once a handler has run (Proton's hands SIGTERM to its writer thread and
    // returns); waiting again leaves the program to that thread's re-raised signal instead of
    // racing it to exit().
    for (;;) pause();
  }
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  if (self) proton::finalize();
  return status;
}
