#include "backends/cupti/context_failures.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

#include "backends/cupti/cupti_loader.h"
#include "core/stats.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

bool endsContextWork(CUresult result) noexcept {
  switch (result) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

CUresult noteContextSync(const CudaDriverApi &driver, CUcontext context, CUresult result) noexcept {
  if (!endsContextWork(result)) return result;
  try {
    static std::mutex mu;
    static std::unordered_set<CUcontext> *reported = new std::unordered_set<CUcontext>();
    {
      std::lock_guard lock(mu);
      if (!reported->insert(context).second) return result;
    }
    Stats::global().counter("gpu_contexts_failed").add();
    std::string error = driver.errorString(result);
    CUdevice device = -1;
    std::string gpu;
    if (driver.ctxGetDevice && driver.ctxGetDevice(&device) == CUDA_SUCCESS)
      gpu = " of GPU " + std::to_string(device);
    std::fprintf(stderr,
                 "[PROTON] the CUDA context%s failed (%s): what Proton had not read back from "
                 "it yet is lost, so kernels may lack their times (stat kernel_records_untimed) "
                 "and intra-kernel records (stat instrumentation_launches_unrecorded).\n",
                 gpu.c_str(), error.c_str());
  } catch (...) {  // out of memory for the message: the count above is what is left
  }
  return result;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
