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
inline namespace PROTON_CUPTI_ABI {

// The kernel record layout this major's CUPTI delivers for CUPTI_ACTIVITY_KIND_KERNEL and
// _CONCURRENT_KERNEL: CUpti_ActivityKernel9 from CUDA 12.x's CUPTI, CUpti_ActivityKernel10
// from CUDA 13.0's. Later 13.x releases deliver CUpti_ActivityKernel11..13, which append
// fields after those that translateKernel reads; cupti_translate.cc asserts that the fields
// read sit at the same offsets in every version these headers declare.
#if PROTON_CUPTI_MAJOR == 12
using KernelActivity = CUpti_ActivityKernel9;
#else
using KernelActivity = CUpti_ActivityKernel10;
#endif

// A kernel record (KernelActivity) into a neutral KernelRecord. False for any other kind.
bool translateKernel(const CUpti_Activity *record, KernelRecord &out);

// The launch callbacks Proton subscribes to, and which of them launch a whole graph.
bool isGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
extern const CUpti_CallbackId kRuntimeLaunchCallbacks[];
extern const size_t kNumRuntimeLaunchCallbacks;
extern const CUpti_CallbackId kDriverLaunchCallbacks[];
extern const size_t kNumDriverLaunchCallbacks;
// cudaGraphLaunch_ptsz / cuGraphLaunch_ptsz: a null stream is the per-thread one.
bool isPerThreadGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// cuGraphExecUpdate(_v2) (the runtime's cudaGraphExecUpdate calls it): an executable graph
// takes its nodes' parameters from another graph. Both parameter blocks start with
// { CUgraphExec hGraphExec; CUgraph hGraph; }.
extern const CUpti_CallbackId kDriverGraphUpdateCallbacks[];
extern const size_t kNumDriverGraphUpdateCallbacks;
bool isGraphExecUpdate(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// cuModuleUnload / cuLibraryUnload: their parameter blocks hold the module's (library's) handle.
extern const CUpti_CallbackId kDriverUnloadCallbacks[];
extern const size_t kNumDriverUnloadCallbacks;
bool isModuleUnload(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// The stream calls Proton watches, both domains (a runtime call also reaches the driver's);
// each one's parameter block starts with the stream (null in a _ptsz call: the per-thread
// stream).
// - kCaptureBegins, kCaptureEnds, kDestroyed: which captures are under way, so that a flush
//   does not synchronise a context while one is (CaptureWatch). Subscribed while the backend
//   runs.
// - kCaptureBegins, kDestroyed and kJoins: the calls before which an instrumentation drain
//   must mark a stream, since it can no longer wait for it afterwards: the stream begins a
//   capture, is destroyed, or joins a capture (waits for an event). kJoins is subscribed while
//   an instrumentation session runs.
enum class StreamCall { kCaptureBegins, kCaptureEnds, kDestroyed, kJoins };
struct StreamCallback {
  CUpti_CallbackId cbid;
  StreamCall kind;
  bool perThread;  // a _ptsz call
};
// The entry of a watched call, or null.
const StreamCallback *streamCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
extern const StreamCallback kRuntimeStreamCallbacks[];
extern const size_t kNumRuntimeStreamCallbacks;
extern const StreamCallback kDriverStreamCallbacks[];
extern const size_t kNumDriverStreamCallbacks;

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
