#include "backends/cupti/cupti_translate.h"

#include <algorithm>
#include <cstddef>
#include <iterator>

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

namespace {

// Every field translateKernel reads is at the same offset in `Newer` as in KernelActivity, so
// a record of a later version of this major reads correctly.
template <typename Newer>
constexpr bool sameFieldsAs() {
  return offsetof(Newer, kind) == offsetof(KernelActivity, kind) &&
         offsetof(Newer, start) == offsetof(KernelActivity, start) &&
         offsetof(Newer, end) == offsetof(KernelActivity, end) &&
         offsetof(Newer, deviceId) == offsetof(KernelActivity, deviceId) &&
         offsetof(Newer, streamId) == offsetof(KernelActivity, streamId) &&
         offsetof(Newer, correlationId) == offsetof(KernelActivity, correlationId) &&
         offsetof(Newer, name) == offsetof(KernelActivity, name) &&
         offsetof(Newer, graphNodeId) == offsetof(KernelActivity, graphNodeId) &&
         offsetof(Newer, gridId) == offsetof(KernelActivity, gridId) &&
         offsetof(Newer, contextId) == offsetof(KernelActivity, contextId);
}
static_assert(sameFieldsAs<CUpti_ActivityKernel9>());  // CUDA 12's, declared by both majors
// CUDA 13.5's headers declare every later version (which 13.x introduced each is not
// spelled out in them, so intermediate headers are checked against CUDA 12's layout only).
#if PROTON_CUPTI_MAJOR >= 13 && CUPTI_API_VERSION >= 130500
static_assert(sameFieldsAs<CUpti_ActivityKernel11>());
static_assert(sameFieldsAs<CUpti_ActivityKernel12>());
static_assert(sameFieldsAs<CUpti_ActivityKernel13>());
#endif

}  // namespace

bool translateKernel(const CUpti_Activity *record, KernelRecord &out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
      record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
    return false;
  const auto *k = reinterpret_cast<const KernelActivity *>(record);
  out.correlation = k->correlationId;
  out.startNs = k->start;
  out.endNs = k->end;
  out.device = static_cast<int32_t>(k->deviceId);
  out.stream = k->streamId;
  out.name = k->name;
  out.graphNodeId = k->graphNodeId;
  out.gridId = k->gridId;
  out.context = k->contextId;
  out.deviceType = DeviceType::kCuda;
  return true;
}

const CUpti_CallbackId kRuntimeLaunchCallbacks[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
};
const size_t kNumRuntimeLaunchCallbacks = std::size(kRuntimeLaunchCallbacks);

const CUpti_CallbackId kDriverLaunchCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};
const size_t kNumDriverLaunchCallbacks = std::size(kDriverLaunchCallbacks);

using enum StreamCall;
const StreamCallback kRuntimeStreamCallbacks[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, kCaptureBegins, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000, kCaptureBegins, true},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030, kCaptureBegins, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030, kCaptureBegins, true},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, kCaptureEnds, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000, kCaptureEnds, true},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v3020, kDestroyed, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, kDestroyed, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, kJoins, false},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000, kJoins, true},
};
const size_t kNumRuntimeStreamCallbacks = std::size(kRuntimeStreamCallbacks);

const StreamCallback kDriverStreamCallbacks[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture, kCaptureBegins, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz, kCaptureBegins, true},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, kCaptureBegins, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz, kCaptureBegins, true},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph, kCaptureBegins, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz, kCaptureBegins, true},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, kCaptureEnds, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz, kCaptureEnds, true},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy, kDestroyed, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2, kDestroyed, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, kJoins, false},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz, kJoins, true},
};
const size_t kNumDriverStreamCallbacks = std::size(kDriverStreamCallbacks);

const StreamCallback *streamCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && domain != CUPTI_CB_DOMAIN_DRIVER_API) return nullptr;
  const StreamCallback *table = runtime ? kRuntimeStreamCallbacks : kDriverStreamCallbacks;
  size_t n = runtime ? kNumRuntimeStreamCallbacks : kNumDriverStreamCallbacks;
  for (size_t i = 0; i < n; ++i)
    if (table[i].cbid == cbid) return &table[i];
  return nullptr;
}

bool isGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
    return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
           cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
  return false;
}

bool isPerThreadGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000) ||
         (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
          cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
}

const CUpti_CallbackId kDriverGraphUpdateCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate,
    CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2,
};
const size_t kNumDriverGraphUpdateCallbacks = std::size(kDriverGraphUpdateCallbacks);

const CUpti_CallbackId kDriverUnloadCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload,
};
const size_t kNumDriverUnloadCallbacks = std::size(kDriverUnloadCallbacks);

namespace {
// A driver call of `table`.
template <size_t N>
bool driverCallOf(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                  const CUpti_CallbackId (&table)[N]) {
  return domain == CUPTI_CB_DOMAIN_DRIVER_API && std::ranges::find(table, cbid) != std::end(table);
}
}  // namespace

bool isModuleUnload(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return driverCallOf(domain, cbid, kDriverUnloadCallbacks);
}

bool isGraphExecUpdate(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return driverCallOf(domain, cbid, kDriverGraphUpdateCallbacks);
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
