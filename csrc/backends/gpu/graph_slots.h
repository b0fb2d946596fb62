// What graph callbacks do to the slots captured into graphs: tensor metric values
// (DeviceMetricBuffers) and intra-kernel records (IntraKernelBuffers) follow their graphs
// through clones, instantiations, updates and destruction, and every replay's slots are copied
// out in order with the replays before it (ReplayOrder).
//
//   graphCloned(clone, original);                           // the vendor's graph callbacks
//   graphExecUpdated(exec, graph);                          // a successful cuGraphExecUpdate
//   graphLaunchEntering(driver, exec, stream);              // a graph launch's API enter
//   graphLaunchReturned(driver, exec, stream, ..., ran);    // its API exit
//
// Thread-safe (each buffer and ReplayOrder has its own lock); called from the vendor's
// callbacks, none of them throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gpu/gpu_driver.h"
#include "backends/launch_table.h"

namespace proton::gpu {

void graphCloned(Graph clone, Graph original);
void graphDestroyed(Graph graph);  // about to be
void graphExecCreated(GraphExec exec, Graph graph);
void graphExecDestroyed(GraphExec exec);  // about to be
// The executable graph has the other graph's slots now (its update succeeded).
void graphExecUpdated(GraphExec exec, Graph graph);
// A graph launch about to be enqueued on `stream` (API enter, the launching thread).
void graphLaunchEntering(const Driver &driver, GraphExec exec, Stream stream);
// It returned (`ran`: successfully, not into a capture): its replay's slots are copied out.
void graphLaunchReturned(const Driver &driver, GraphExec exec, Stream stream,
                         const LaunchEntry *entries, size_t n, uint64_t launchNs, uint64_t threadId,
                         bool ran);

}  // namespace proton::gpu
