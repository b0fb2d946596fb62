// The second translation unit of scoped_app built with relocatable device code (-rdc=true):
// its kernel's scope records through the control global both units share.
#include <proton/instrument.cuh>

__global__ void shifted(float *x, int n) {
  PROTON_SCOPE("part");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

int runPart(int launches) {
  float *x = nullptr;
  if (cudaMalloc(&x, 64 * 128 * sizeof(float)) != cudaSuccess) return 1;
  for (int i = 0; i < launches; ++i) shifted<<<64, 128>>>(x, 64 * 128);
  cudaError_t e = cudaDeviceSynchronize();
  cudaFree(x);
  return e == cudaSuccess ? 0 : 1;
}
