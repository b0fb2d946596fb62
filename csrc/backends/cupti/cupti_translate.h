// Translation of CUPTI activity records into vendor-neutral records. This is the only code
// that reads CUPTI record layouts; the C++ tests build real CUPTI structs and feed them here.
//
//   KernelRecord k;
//   if (translateKernel(record, k)) attributor.add(k);
//
// Pure functions; thread-safe.
#pragma once

#include <cupti.h>

#include "backends/kernel_attributor.h"

namespace proton::cupti {

// CUPTI_ACTIVITY_KIND_KERNEL and _CONCURRENT_KERNEL records (CUpti_ActivityKernel10 in
// CUDA 13). False for any other kind.
bool translateKernel(const CUpti_Activity *record, KernelRecord &out);

// The launch callbacks Proton subscribes to, and which of them launch a whole graph.
bool isGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
extern const CUpti_CallbackId kRuntimeLaunchCallbacks[];
extern const size_t kNumRuntimeLaunchCallbacks;
extern const CUpti_CallbackId kDriverLaunchCallbacks[];
extern const size_t kNumDriverLaunchCallbacks;

}  // namespace proton::cupti
