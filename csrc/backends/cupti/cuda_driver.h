// The vendor-neutral driver table (backends/gpu/gpu_driver.h) over the CUDA driver: each entry
// calls the libcuda function of the same name (cupti_loader.h's CudaDriverApi), converting
// handles and enums, which keep their values. Proton's tree reduction is tree_reduce.cu's PTX,
// and its launches are Proton's own (InternalLaunchGuard): filed in no session. Its copy of
// tensor metric values (copyKernelAsync) is a PTX kernel too, whose launches are filed (as
// <metric>, where SessionManager::MetricCopyPlacement puts them).
//
//   const gpu::Driver *driver = cudaDriver(loadCudaDriver().value());
//   IntraKernelBuffers::global().setDriver(driver);
//
// One CUDA driver per process (loadCudaDriver's): the table calls the one given last, and has
// the optional functions of the first. Thread-safe, as the driver is.
#pragma once

#include "backends/cupti/cupti_loader.h"
#include "backends/gpu/gpu_driver.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

const gpu::Driver *cudaDriver(const CudaDriverApi *api);

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
