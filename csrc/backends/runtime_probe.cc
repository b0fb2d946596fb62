#include "backends/runtime_probe.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

namespace proton {
namespace {

std::atomic<bool> gCudaInitialising{false};

RuntimeProbe probe() {
  RuntimeProbe result;
  if (const char *force = std::getenv("PROTON_FORCE_NO_GPU"); force && force[0] == '1') {
    result.reason = "PROTON_FORCE_NO_GPU=1 is set";
    return result;
  }
  if (gCudaInitialising.load()) {
    result.available = true;
    result.deviceCount = -1;
    return result;
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    const char *err = dlerror();
    result.reason = std::string("the NVIDIA driver library libcuda.so.1 could not be loaded (") +
                    (err ? err : "unknown error") + ")";
    return result;
  }
  // CUresult cuInit(unsigned); CUresult cuDeviceGetCount(int *): 0 is CUDA_SUCCESS.
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int *);
  auto init = reinterpret_cast<InitFn>(dlsym(cuda, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  if (!init || !count) {
    result.reason = "libcuda.so.1 lacks cuInit or cuDeviceGetCount";
    return result;
  }
  int rc = init(0);
  if (rc != 0) {
    result.reason = "cuInit failed with CUDA error " + std::to_string(rc);
    return result;
  }
  if (count(&result.deviceCount) != 0 || result.deviceCount == 0) {
    result.reason = "the NVIDIA driver reports no GPU";
    return result;
  }
  result.available = true;
  return result;
}

}  // namespace

void noteCudaInitialising() { gCudaInitialising.store(true); }

const RuntimeProbe &probeCudaRuntime() {
  static const RuntimeProbe result = probe();
  return result;
}

}  // namespace proton
