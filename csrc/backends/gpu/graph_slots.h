// What CUDA graph callbacks do to the slots captured into graphs: tensor metric values
// (DeviceMetricBuffers) and intra-kernel records (IntraKernelBuffers) follow their graphs
// through clones, instantiations, updates and destruction, and every replay's slots are copied
// out in order with the replays before it (ReplayOrder).
//
//   if (onGraphSlotsResource(cbid, data)) return;            // resource callbacks
//   onGraphExecUpdate(cb);                                  // cuGraphExecUpdate(_v2)
//   graphLaunchEntering(driver, exec, stream);              // a graph launch's API enter
//   graphLaunchReturned(driver, exec, stream, ..., ran);    // its API exit
//
// Thread-safe (each buffer and ReplayOrder has its own lock); called from CUPTI callbacks,
// none of them throws.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "backends/launch_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

struct CudaDriverApi;

// GRAPH_CLONED, GRAPH_DESTROY_STARTING, GRAPHEXEC_CREATED, GRAPHEXEC_DESTROY_STARTING: true if
// `cbid` is one of them (handled).
bool onGraphSlotsResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data);
// cuGraphExecUpdate(_v2)'s callback: at its successful exit, the executable graph has the
// other graph's slots.
void onGraphExecUpdate(const CUpti_CallbackData *cb);
// A graph launch about to be enqueued on `stream` (API enter, the launching thread).
void graphLaunchEntering(const CudaDriverApi &driver, CUgraphExec exec, CUstream stream);
// It returned (`ran`: successfully, not into a capture): its replay's slots are copied out.
void graphLaunchReturned(const CudaDriverApi &driver, CUgraphExec exec, CUstream stream,
                         const LaunchEntry *entries, size_t n, uint64_t launchNs, uint64_t threadId,
                         bool ran);

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
