// CuptiBackend: NVIDIA kernel tracing through CUPTI.
//
//   GpuBackend *b = cuptiBackend();     // the process-wide instance
//   b->acquire(session);  ...  b->flush();  b->release(session);
//
// How a kernel is attributed (see DESIGN.md §2):
//   launching thread, CUPTI API_ENTER callback of cuLaunchKernel/cudaLaunchKernel/...:
//     LaunchTracker -> BackendHost::launchContext() -> LaunchTable::record(corr, nodes)
//   CUPTI API_EXIT: a failed or graph-captured launch is cancelled (it yields no record); one
//     that ran gets its launch metadata's metrics (BackendHost::endLaunch)
//   CUPTI worker thread (or a flush): activity buffer -> translateKernel -> KernelAttributor
// Graph nodes made during stream capture remember the capturing thread's context, launch
// metadata and recording sessions (LaunchTracker, cupti_graphs.h -> CaptureRegistry) until a
// flush after their graph is destroyed. NVTX push/pop become scopes of the calling thread.
// mode="pcsampling" (tree data only) adds instruction sampling: one PcSampler for all
// sampling sessions, enabled on every context known at the first such session and on each
// context first seen at a launch later; kernel records tell PcSampleAttributor which kernel
// frames a function's samples belong to. A GPU that refuses to sample (no permission to read
// performance counters, unsupported) is reported on stderr and counted; the session starts
// anyway and records kernel times. An interval that is not a power of two is rounded to the
// nearest 2^k cycles, k in [5, 31].
//
// Threading: callbacks may run on any thread and are noexcept; the launch path takes no
// shared lock and allocates nothing. acquire/release/flush are serialised by mu_. Activity
// buffers come from a bounded pool and are processed one at a time (processMu_).
#pragma once

#include "backends/gpu_backend.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

// Activity buffer geometry: kBufferBytes each, at most kMaxBuffers alive; past that CUPTI
// drops records, which are counted (activity_buffers_unavailable, activity_records_dropped).
inline constexpr size_t kBufferBytes = size_t(4) << 20;
inline constexpr size_t kMaxBuffers = 64;
// Free buffers kept for reuse; more are unmapped when CUPTI gives them back.
inline constexpr size_t kKeptBuffers = 4;

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
