// The CUDA devices of the process, as profiles list them (DeviceTable: arch, SMs, clocks,
// memory bus, PCI id), read through the driver when kernel tracing starts.
#pragma once

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

struct CudaDriverApi;

void noteCudaDevices(const CudaDriverApi &driver);

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
