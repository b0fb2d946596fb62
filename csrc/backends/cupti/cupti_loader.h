// CuptiApi / CudaDriverApi: every CUPTI and CUDA driver function the backend calls, resolved
// once with dlsym. Nothing links to libcupti or libcuda; the headers only give types.
//
//   Result<const CuptiApi *> api = loadCupti();
//   if (!api.isOk()) return api.status();   // one message naming every place searched
//   api.value()->activityFlushAll(0);
//
// Compiled once per CUPTI major (namespace proton::cupti::v12 / ::v13, against that major's
// headers). Which library is used is decided once per process by the neutral selector
// (cupti_select.h: PROTON_CUPTI_LIB_PATH, a CUPTI already loaded, the Python layer's
// directories, the toolkit, the loader path); this copy only resolves its symbols, and
// refuses a library of another major.
//
// Thread-safe: loading happens once, under a lock; the tables are immutable afterwards.
#pragma once

#if !defined(PROTON_CUPTI_MAJOR) || !defined(PROTON_CUPTI_ABI)
#error "CUPTI backend sources are built once per CUPTI major (see CMakeLists.txt)"
#endif

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <string>

#include "core/status.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

struct CuptiApi {
  std::string path;      // the library file used
  uint32_t version = 0;  // cuptiGetVersion()

  decltype(&::cuptiGetResultString) getResultString = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
#if PROTON_CUPTI_MAJOR >= 13
  decltype(&::cuptiSubscribe_v2) subscribeV2 = nullptr;  // optional (CUDA 13's CUPTI)
#endif
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enableCallback = nullptr;
  decltype(&::cuptiEnableDomain) enableDomain = nullptr;
  decltype(&::cuptiActivityEnable) activityEnable = nullptr;
  decltype(&::cuptiActivityDisable) activityDisable = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) activityRegisterCallbacks = nullptr;
  decltype(&::cuptiActivityFlushAll) activityFlushAll = nullptr;
  decltype(&::cuptiActivityGetNextRecord) activityGetNextRecord = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) activityGetNumDroppedRecords = nullptr;
  decltype(&::cuptiGetGraphNodeId) getGraphNodeId = nullptr;
  decltype(&::cuptiActivityFlushPeriod) activityFlushPeriod = nullptr;  // optional
  decltype(&::cuptiActivityRegisterTimestampCallback) registerTimestampCallback =
      nullptr;  // optional

  // PC sampling (cupti_pcsampling.h): optional for tracing, all required by
  // mode="pcsampling"; pcSamplingMissing names those this library lacks.
  decltype(&::cuptiPCSamplingEnable) pcSamplingEnable = nullptr;
  decltype(&::cuptiPCSamplingDisable) pcSamplingDisable = nullptr;
  decltype(&::cuptiPCSamplingGetData) pcSamplingGetData = nullptr;
  decltype(&::cuptiPCSamplingSetConfigurationAttribute) pcSamplingSetConfiguration = nullptr;
  decltype(&::cuptiPCSamplingGetNumStallReasons) pcSamplingGetNumStallReasons = nullptr;
  decltype(&::cuptiPCSamplingGetStallReasons) pcSamplingGetStallReasons = nullptr;
  decltype(&::cuptiGetSassToSourceCorrelation) getSassToSourceCorrelation = nullptr;
  decltype(&::cuptiGetCubinCrc) getCubinCrc = nullptr;
  std::string pcSamplingMissing;

  std::string errorString(CUptiResult result) const;
};

struct CudaDriverApi {
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuCtxPushCurrent_v2) ctxPushCurrent = nullptr;
  decltype(&::cuCtxPopCurrent_v2) ctxPopCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  // Intra-kernel instrumentation buffers.
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuMemAlloc_v2) memAlloc = nullptr;
  decltype(&::cuStreamIsCapturing) streamIsCapturing = nullptr;
  // A launch's context on a thread that has none current yet (intra_kernel_buffers.cc).
  decltype(&::cuStreamGetCtx) streamGetCtx = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain = nullptr;
  decltype(&::cuFuncGetModule) funcGetModule = nullptr;
  decltype(&::cuModuleGetGlobal_v2) moduleGetGlobal = nullptr;
  // Proton's own tree reduction kernel (tree_reduce.cu), loaded from PTX.
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  // The CUDA runtime (12+) launches context-independent kernels of libraries.
  decltype(&::cuKernelGetLibrary) kernelGetLibrary = nullptr;
  decltype(&::cuLibraryGetGlobal) libraryGetGlobal = nullptr;
  // Tensor metrics (device_metric_buffers.h).
  decltype(&::cuMemcpyDtoDAsync_v2) memcpyDtoDAsync = nullptr;
  // Intra-kernel CUDA graph slots, copied out and cleared after each replay.
  decltype(&::cuMemsetD8Async) memsetD8Async = nullptr;
  decltype(&::cuPointerGetAttribute) pointerGetAttribute = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) exchangeCaptureMode = nullptr;
  // Zeroing a new ring on a stream of Proton's own (intra_kernel_buffers.cc), and freeing one
  // that could not be set up.
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuMemFree_v2) memFree = nullptr;
  // A drain waits for the streams its ring's launches ran on, and for a mark recorded on each
  // one that began a capture or was destroyed since, not for the context.
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  // Replays of one CUDA graph's slots on two streams are put in order (replay_order.h).
  decltype(&::cuStreamWaitEvent) streamWaitEvent = nullptr;
  decltype(&::cuEventDestroy_v2) eventDestroy = nullptr;
  decltype(&::cuStreamGetFlags) streamGetFlags = nullptr;  // a capture on a blocking stream
  // Drains copy on a stream of Proton's own, not the legacy one, whose synchronous copies a
  // CUDA graph being captured on another thread (global mode) or on a blocking stream cannot
  // live with.
  decltype(&::cuMemcpyHtoDAsync_v2) memcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync_v2) memcpyDtoHAsync = nullptr;
  decltype(&::cuMemcpy2DAsync_v2) memcpy2DAsync = nullptr;
  // cuStreamGetCaptureInfo_v2 (CUDA 11.3+; declared here: newer headers hide it).
  using StreamGetCaptureInfoV2 = CUresult(CUDAAPI *)(CUstream, CUstreamCaptureStatus *,
                                                     cuuint64_t *, CUgraph *, const CUgraphNode **,
                                                     size_t *);
  StreamGetCaptureInfoV2 streamGetCaptureInfo = nullptr;
  // Naming the error of a context whose work failed (context_failures.h).
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;

  // "CUDA_ERROR_X: what it means", or "CUDA error <n>" where the driver cannot name it.
  std::string errorString(CUresult result) const;
};

// The CUPTI major this copy of the backend was compiled for.
inline constexpr int kCuptiMajor = PROTON_CUPTI_MAJOR;

Result<const CuptiApi *> loadCupti();
Result<const CudaDriverApi *> loadCudaDriver();

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
