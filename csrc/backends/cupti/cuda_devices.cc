#include "backends/cupti/cuda_devices.h"

#include <cstdio>
#include <string>

#include "backends/cupti/cupti_loader.h"
#include "core/device_info.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

void noteCudaDevices(const CudaDriverApi &driver) {
  int count = 0;
  if (driver.deviceGetCount(&count) != CUDA_SUCCESS) return;
  for (int i = 0; i < count; ++i) {
    CUdevice device;
    if (driver.deviceGet(&device, i) != CUDA_SUCCESS) continue;
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      return driver.deviceGetAttribute(&v, a, device) == CUDA_SUCCESS ? v : 0;
    };
    DeviceInfo info;
    info.type = DeviceType::kCuda;
    info.index = i;
    info.arch = std::to_string(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
                               attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    info.numSms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.clockRateKhz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memoryClockRateKhz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info.busWidthBits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    char pci[32];
    std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x.0", attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
                  attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID), attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
    info.pciBusId = pci;
    DeviceTable::global().set(info);
  }
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
