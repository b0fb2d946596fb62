// LaunchTracker: what the CUPTI backend does at each launch callback and at each CUDA-graph
// node callback, apart from CUPTI's subscription plumbing so that tests can drive it with real
// CUPTI callback structs, no GPU needed.
//
//   LaunchTracker tracker(launches, captures);
//   tracker.setNodeIdFn(api->getGraphNodeId);
//   tracker.onLaunch(domain, cbid, callbackData);      // runtime/driver launch callbacks
//   tracker.onGraphResource(cbid, resourceData);       // GRAPHNODE_CREATED/CLONED/DESTROY
//
// A launch is attributed at API enter (BackendHost::launchContext, recorded in the
// LaunchTable under its correlation id). A graph node created while a launch is in progress
// on the thread means the launch was captured, not run: the launch is cancelled and the node
// keeps the context, launch metadata and recording sessions of that moment
// (BackendHost::captureContext) for its replays. Instantiation clones nodes (aliases);
// a destroyed node is retired, and forgotten after a flush (see CaptureRegistry).
//
// Launch callbacks: any thread, per-thread state only, no lock. Graph callbacks take the
// registry's lock.
#pragma once

#include <cupti.h>

#include "backends/capture_registry.h"
#include "backends/launch_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

// While alive on a thread, kernels that thread launches are Proton's own (the tree
// reduction): their launches are filed in no session, so their records are dropped.
class InternalLaunchGuard {
 public:
  InternalLaunchGuard();
  ~InternalLaunchGuard();
  InternalLaunchGuard(const InternalLaunchGuard &) = delete;
  InternalLaunchGuard &operator=(const InternalLaunchGuard &) = delete;
  static bool active();  // on the calling thread
};

// The kernel a driver launch callback launches (cuLaunchKernel[Ex], cuLaunchCooperativeKernel,
// and their _ptsz forms); null for any other call.
CUfunction launchedFunction(CUpti_CallbackId cbid, const void *params);

// What CUDA graph callbacks do to the slots captured into graphs (backends/gpu/graph_slots.h).
// GRAPH_CLONED, GRAPH_DESTROY_STARTING, GRAPHEXEC_CREATED, GRAPHEXEC_DESTROY_STARTING: true if
// `cbid` is one of them (handled).
bool onGraphSlotsResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data);
// cuGraphExecUpdate(_v2)'s callback: at its successful exit, the executable graph has the
// other graph's slots.
void onGraphExecUpdate(const CUpti_CallbackData *cb);

class LaunchTracker {
 public:
  using NodeIdFn = CUptiResult (*)(CUgraphNode, uint64_t *);  // cuptiGetGraphNodeId

  LaunchTracker(LaunchTable &launches, CaptureRegistry &captures)
      : launches_(launches), captures_(captures) {}
  void setNodeIdFn(NodeIdFn fn) { nodeId_ = fn; }
  // Called when a graph launch is about to be enqueued (API enter) and when it returned (`ran`:
  // successfully, and not into a capture), on the launching thread, with the launch's
  // executable graph, stream (the per-thread stream's handle for a _ptsz call's null) and
  // attribution (no Proton lock held).
  using GraphEnterFn = void (*)(CUgraphExec exec, CUstream stream);
  using GraphLaunchFn = void (*)(CUgraphExec exec, CUstream stream, const LaunchEntry *entries,
                                 size_t n, uint64_t launchNs, uint64_t threadId, bool ran);
  void setGraphLaunchFns(GraphEnterFn entering, GraphLaunchFn launched) {
    graphEntering_ = entering;
    graphLaunched_ = launched;
  }

  void onLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
  // CUPTI_CBID_RESOURCE_GRAPHNODE_{CREATED,CLONED,DESTROY_STARTING}.
  void onGraphResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data);

 private:
  LaunchTable &launches_;
  CaptureRegistry &captures_;
  NodeIdFn nodeId_ = nullptr;
  GraphEnterFn graphEntering_ = nullptr;
  GraphLaunchFn graphLaunched_ = nullptr;
};

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
