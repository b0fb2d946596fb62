#include "backends/gpu/graph_slots.h"

#include "backends/gpu/device_metric_buffers.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/gpu/replay_order.h"

namespace proton::gpu {

void graphCloned(Graph clone, Graph original) {
  DeviceMetricBuffers::global().onGraphCloned(clone, original);
  IntraKernelBuffers::global().onGraphCloned(clone, original);  // its captured slots, likewise
}

void graphDestroyed(Graph graph) {
  DeviceMetricBuffers::global().onGraphDestroyed(graph);
  IntraKernelBuffers::global().onGraphDestroyed(graph);
}

void graphExecCreated(GraphExec exec, Graph graph) {
  DeviceMetricBuffers::global().onGraphExecCreated(exec, graph);
  IntraKernelBuffers::global().onGraphExecCreated(exec, graph);
}

void graphExecDestroyed(GraphExec exec) {
  DeviceMetricBuffers::global().onGraphExecDestroyed(exec);
  IntraKernelBuffers::global().onGraphExecDestroyed(exec);
}

void graphExecUpdated(GraphExec exec, Graph graph) {
  DeviceMetricBuffers::global().onGraphExecUpdated(exec, graph);
  IntraKernelBuffers::global().onGraphExecUpdated(exec, graph);
}

void graphLaunchEntering(const Driver &driver, GraphExec exec, Stream stream) {
  ReplayOrder &order = ReplayOrder::global();
  order.beginLaunch();
  order.entering(driver, DeviceMetricBuffers::global().replayKey(exec), stream);
  order.entering(driver, IntraKernelBuffers::global().replayKey(exec), stream);
}

void graphLaunchReturned(const Driver &driver, GraphExec exec, Stream stream,
                         const LaunchEntry *entries, size_t n, uint64_t launchNs, uint64_t threadId,
                         bool ran) {
  // The slots are released whatever happens on the way (another thread may wait for them);
  // the event follows whatever copies reached the stream.
  try {
    if (ran) {
      DeviceMetricBuffers::global().onGraphLaunched(exec, stream, entries, n, launchNs, threadId);
      IntraKernelBuffers::global().onGraphLaunched(exec, stream, entries, n);
    }
  } catch (...) {
    ReplayOrder::global().done(driver, stream, ran);
    throw;
  }
  ReplayOrder::global().done(driver, stream, ran);
}

}  // namespace proton::gpu
