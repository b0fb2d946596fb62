// Real CUPTI records built by the CUPTI tests (no GPU): one place that knows which fields a
// kernel record needs.
//
//   KernelActivity k = kernelRecord(/*correlation=*/17, "vadd", 100, 350);
//   translateKernel(reinterpret_cast<const CUpti_Activity *>(&k), out);
#pragma once

#include <cupti.h>

#include <cstdint>

#include "backends/cupti/cupti_translate.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

// A concurrent-kernel record on device 0, stream 7.
inline KernelActivity kernelRecord(uint32_t correlation, const char *name, uint64_t start,
                                   uint64_t end, uint64_t graphNode = 0) {
  KernelActivity k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = correlation;
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 0;
  k.streamId = 7;
  k.graphNodeId = graphNode;
  return k;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
