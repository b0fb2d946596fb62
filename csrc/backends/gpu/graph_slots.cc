#include "backends/gpu/graph_slots.h"

#include "backends/gpu/device_metric_buffers.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/gpu/replay_order.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

bool onGraphSlotsResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data) {
  const auto *graph = static_cast<const CUpti_GraphData *>(data->resourceDescriptor);
  DeviceMetricBuffers &buffers = DeviceMetricBuffers::global();
  IntraKernelBuffers &intra = IntraKernelBuffers::global();  // its captured slots, likewise
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
      if (graph) buffers.onGraphCloned(graph->graph, graph->originalGraph);
      if (graph) intra.onGraphCloned(graph->graph, graph->originalGraph);
      return true;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      if (graph) buffers.onGraphDestroyed(graph->graph);
      if (graph) intra.onGraphDestroyed(graph->graph);
      return true;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
      if (graph) buffers.onGraphExecCreated(graph->graphExec, graph->graph);
      if (graph) intra.onGraphExecCreated(graph->graphExec, graph->graph);
      return true;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      if (graph) buffers.onGraphExecDestroyed(graph->graphExec);
      if (graph) intra.onGraphExecDestroyed(graph->graphExec);
      return true;
    default:
      return false;
  }
}

void onGraphExecUpdate(const CUpti_CallbackData *cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionParams || !cb->functionReturnValue ||
      *static_cast<const CUresult *>(cb->functionReturnValue) != CUDA_SUCCESS)
    return;
  struct UpdateParams {  // cuGraphExecUpdate(_v2)_params: their first two fields
    CUgraphExec exec;
    CUgraph graph;
  };
  const auto *params = static_cast<const UpdateParams *>(cb->functionParams);
  DeviceMetricBuffers::global().onGraphExecUpdated(params->exec, params->graph);
  IntraKernelBuffers::global().onGraphExecUpdated(params->exec, params->graph);
}

void graphLaunchEntering(const CudaDriverApi &driver, CUgraphExec exec, CUstream stream) {
  ReplayOrder &order = ReplayOrder::global();
  order.beginLaunch();
  order.entering(driver, DeviceMetricBuffers::global().replayKey(exec), stream);
  order.entering(driver, IntraKernelBuffers::global().replayKey(exec), stream);
}

void graphLaunchReturned(const CudaDriverApi &driver, CUgraphExec exec, CUstream stream,
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

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
