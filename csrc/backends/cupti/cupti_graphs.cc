#include "backends/cupti/cupti_graphs.h"

#include <algorithm>

#include "backends/cupti/cupti_translate.h"
#include "backends/gpu/graph_slots.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/gpu/native_scopes.h"
#include "core/backend_host.h"
#include "core/clock.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

// Per-thread state of the launch in progress: nesting (a runtime launch calls a driver
// launch: one launch), whether it was captured into a graph instead of running, and, when it
// consumed launch metadata, its entries, to give it the metadata's metrics once it ran.
struct LaunchTls {
  uint32_t depth = 0;
  bool captured = false;
  bool metadata = false;
  uint32_t count = 0;
  uint64_t correlation = 0;  // of the outermost call: the one the kernel's record carries
  LaunchEntry entries[LaunchInfo::kMaxEntries];
  // A graph launch: its executable graph and stream, for tensor metrics captured in it.
  bool graph = false;
  CUgraphExec exec = nullptr;
  CUstream stream = nullptr;
  uint64_t launchNs = 0;
  uint64_t threadId = 0;
};

// cudaGraphLaunch(_ptsz) and cuGraphLaunch(_ptsz) parameter blocks share this layout.
struct GraphLaunchParams {
  CUgraphExec exec;
  CUstream stream;
};
thread_local LaunchTls tlsLaunch;
thread_local bool tlsInternalLaunch = false;

// A driver launch, for the native scopes (kernels built with proton/instrument.cuh): nothing
// to do unless an instrumentation session runs.
void nativeLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, uint64_t correlation,
                  const LaunchEntry *entries, size_t n) {
  gpu::NativeScopes &scopes = gpu::NativeScopes::global();
  if (!scopes.active()) return;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
      cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)
    return scopes.onGraphLaunch();
  if (CUfunction function = launchedFunction(cbid, cb->functionParams))
    scopes.onLaunch(reinterpret_cast<gpu::Function>(function),
                    reinterpret_cast<gpu::Context>(cb->context), cb->contextUid, cb->symbolName,
                    correlation, entries, n);
}

}  // namespace

CUfunction launchedFunction(CUpti_CallbackId cbid, const void *params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return static_cast<const cuLaunchKernel_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return static_cast<const cuLaunchKernel_ptsz_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return static_cast<const cuLaunchKernelEx_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return static_cast<const cuLaunchKernelEx_ptsz_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return static_cast<const cuLaunchCooperativeKernel_params *>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return static_cast<const cuLaunchCooperativeKernel_ptsz_params *>(params)->f;
    default:
      return nullptr;
  }
}

InternalLaunchGuard::InternalLaunchGuard() { tlsInternalLaunch = true; }
InternalLaunchGuard::~InternalLaunchGuard() { tlsInternalLaunch = false; }
bool InternalLaunchGuard::active() { return tlsInternalLaunch; }

void LaunchTracker::onLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const CUpti_CallbackData *cb) {
  LaunchTls &t = tlsLaunch;
  BackendHost &host = BackendHost::get();
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (t.depth++ > 0) {  // the runtime launching through the driver: one launch
      if (domain == CUPTI_CB_DOMAIN_DRIVER_API)  // where the CUfunction is known
        nativeLaunch(cbid, cb, t.correlation, t.entries, t.count);
      return;
    }
    t.captured = false;
    t.correlation = cb->correlationId;
    LaunchEntry *entries = t.entries;
    uint64_t threadId = 0;
    StringId name;
    size_t n = tlsInternalLaunch
                   ? 0
                   : host.launchContext(entries, LaunchInfo::kMaxEntries, &threadId, &name);
    uint64_t launchNs = n > 0 && host.traceLive() ? monotonicNs() : 0;
    t.metadata = name != StringId{};
    t.count = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
    bool graphLaunch = isGraphLaunch(domain, cbid);
    t.graph = graphLaunch && cb->functionParams;
    if (t.graph) {
      const auto *params = static_cast<const GraphLaunchParams *>(cb->functionParams);
      t.exec = params->exec;
      t.stream = params->stream;
      if (!t.stream && isPerThreadGraphLaunch(domain, cbid)) t.stream = CU_STREAM_PER_THREAD;
      t.launchNs = launchNs;
      t.threadId = threadId;
      if (graphEntering_ && !tlsInternalLaunch) graphEntering_(t.exec, t.stream);
    }
    launches_.record(cb->correlationId, entries, static_cast<uint32_t>(n), graphLaunch, launchNs,
                     threadId, name);
    // An instrumented launch (its buffer was just handed out on this thread). Not Proton's own
    // launches: a drain launches its reduction holding the buffers' lock.
    if (!tlsInternalLaunch) {
      gpu::IntraKernelBuffers &intra = gpu::IntraKernelBuffers::global();
      if (intra.pendingCapture()) {  // being captured: its replays take the capture's context
        CaptureContext context;
        host.captureContext(context, /*inLaunch=*/true);
        intra.bindCaptured(std::move(context), cb->symbolName);
      } else {
        intra.bindLaunch(cb->correlationId, entries, n, cb->symbolName, name);
      }
    }
    // A kernel built with proton/instrument.cuh (nothing to do unless instrumenting).
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
      nativeLaunch(cbid, cb, cb->correlationId, entries, t.count);
    return;
  }
  if (t.depth == 0 || --t.depth > 0) return;
  // The kernel is on its stream now (or never will be): drains may wait for it.
  if (!tlsInternalLaunch) gpu::IntraKernelBuffers::global().launchReturned(t.captured);
  int result = cb->functionReturnValue ? *static_cast<const int *>(cb->functionReturnValue) : 0;
  bool ran = result == 0 && !t.captured;
  if (!ran) launches_.cancel(cb->correlationId);
  // (Not Proton's own launch: a failed reduction returns here under the buffers' lock.)
  if (result != 0 && !tlsInternalLaunch)
    gpu::IntraKernelBuffers::global().cancelLaunch(cb->correlationId);
  if (t.metadata) {
    t.metadata = false;
    host.endLaunch(t.entries, t.count, ran);
  }
  if (t.graph && graphLaunched_ && !tlsInternalLaunch)
    graphLaunched_(t.exec, t.stream, t.entries, t.count, t.launchNs, t.threadId, ran);
}

void LaunchTracker::onGraphResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data) {
  const auto *graph = static_cast<const CUpti_GraphData *>(data->resourceDescriptor);
  if (!graph || !nodeId_) return;
  uint64_t node = 0;
  if (nodeId_(graph->node, &node) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    bool inLaunch = tlsLaunch.depth > 0;
    if (inLaunch) tlsLaunch.captured = true;  // a launch being captured, not run
    CaptureContext context;
    BackendHost::get().captureContext(context, inLaunch);
    captures_.add(node, std::move(context));
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0;
    if (nodeId_(graph->originalNode, &original) == CUPTI_SUCCESS) captures_.alias(node, original);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING) {
    captures_.remove(node);  // retired: records of its last replays may still be on the way
  }
}

bool onGraphSlotsResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data) {
  const auto *graph = static_cast<const CUpti_GraphData *>(data->resourceDescriptor);
  auto g = [](CUgraph g) { return reinterpret_cast<gpu::Graph>(g); };
  auto exec = [](CUgraphExec e) { return reinterpret_cast<gpu::GraphExec>(e); };
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
      if (graph) gpu::graphCloned(g(graph->graph), g(graph->originalGraph));
      return true;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      if (graph) gpu::graphDestroyed(g(graph->graph));
      return true;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
      if (graph) gpu::graphExecCreated(exec(graph->graphExec), g(graph->graph));
      return true;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      if (graph) gpu::graphExecDestroyed(exec(graph->graphExec));
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
  gpu::graphExecUpdated(reinterpret_cast<gpu::GraphExec>(params->exec),
                        reinterpret_cast<gpu::Graph>(params->graph));
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
