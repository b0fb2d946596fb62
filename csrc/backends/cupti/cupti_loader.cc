#include "backends/cupti/cupti_loader.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "backends/cupti/cupti_select.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

static_assert(CUPTI_API_VERSION >= 10000 ? CUPTI_API_VERSION / 10000 == PROTON_CUPTI_MAJOR
                                         : PROTON_CUPTI_MAJOR == 12,
              "cupti.h is not of the CUPTI major this copy is compiled for");

// Resolves `field` to `symbol`; a missing required symbol is added to `missing`.
template <typename Fn>
void resolve(void *handle, Fn &field, const char *symbol, std::string *missing) {
  field = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!field && missing) *missing += std::string(missing->empty() ? "" : ", ") + symbol;
}

// The library the process chose (cupti_select.h), with this major's function table.
Result<const CuptiApi *> load() {
  Result<CuptiLibrary> lib = processCupti();
  if (!lib.isOk()) return lib.status();
  const CuptiLibrary &l = lib.value();
  if (l.major != kCuptiMajor)  // the dispatcher routes by major: a broken invariant
    return Status{StatusCode::kInternal, "[PROTON] the CUDA " + std::to_string(kCuptiMajor) +
                                             " backend was handed CUDA " + std::to_string(l.major) +
                                             "'s CUPTI " + l.path};
  void *handle = l.handle;
  auto api = std::make_unique<CuptiApi>();
  api->path = l.path;
  api->version = l.version;
  std::string missing;
  resolve(handle, api->getResultString, "cuptiGetResultString", &missing);
  resolve(handle, api->subscribe, "cuptiSubscribe", &missing);
  resolve(handle, api->unsubscribe, "cuptiUnsubscribe", &missing);
  resolve(handle, api->enableCallback, "cuptiEnableCallback", &missing);
  resolve(handle, api->enableDomain, "cuptiEnableDomain", &missing);
  resolve(handle, api->activityEnable, "cuptiActivityEnable", &missing);
  resolve(handle, api->activityDisable, "cuptiActivityDisable", &missing);
  resolve(handle, api->activityRegisterCallbacks, "cuptiActivityRegisterCallbacks", &missing);
  resolve(handle, api->activityFlushAll, "cuptiActivityFlushAll", &missing);
  resolve(handle, api->activityGetNextRecord, "cuptiActivityGetNextRecord", &missing);
  resolve(handle, api->activityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", &missing);
  resolve(handle, api->getGraphNodeId, "cuptiGetGraphNodeId", &missing);
#if PROTON_CUPTI_MAJOR >= 13
  resolve(handle, api->subscribeV2, "cuptiSubscribe_v2", nullptr);
#endif
  resolve(handle, api->activityFlushPeriod, "cuptiActivityFlushPeriod", nullptr);
  resolve(handle, api->registerTimestampCallback, "cuptiActivityRegisterTimestampCallback",
          nullptr);
  resolve(handle, api->pcSamplingEnable, "cuptiPCSamplingEnable", &api->pcSamplingMissing);
  resolve(handle, api->pcSamplingDisable, "cuptiPCSamplingDisable", &api->pcSamplingMissing);
  resolve(handle, api->pcSamplingGetData, "cuptiPCSamplingGetData", &api->pcSamplingMissing);
  resolve(handle, api->pcSamplingSetConfiguration, "cuptiPCSamplingSetConfigurationAttribute",
          &api->pcSamplingMissing);
  resolve(handle, api->pcSamplingGetNumStallReasons, "cuptiPCSamplingGetNumStallReasons",
          &api->pcSamplingMissing);
  resolve(handle, api->pcSamplingGetStallReasons, "cuptiPCSamplingGetStallReasons",
          &api->pcSamplingMissing);
  resolve(handle, api->getSassToSourceCorrelation, "cuptiGetSassToSourceCorrelation",
          &api->pcSamplingMissing);
  resolve(handle, api->getCubinCrc, "cuptiGetCubinCrc", &api->pcSamplingMissing);
  if (!missing.empty())
    return Status{StatusCode::kUnavailable,
                  "[PROTON] " + l.path + " lacks CUPTI functions Proton needs: " + missing};
  return static_cast<const CuptiApi *>(api.release());  // kept for the life of the process
}

}  // namespace

std::string CuptiApi::errorString(CUptiResult result) const {
  const char *text = nullptr;
  if (getResultString && getResultString(result, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

std::string CudaDriverApi::errorString(CUresult result) const {
  const char *name = nullptr, *what = nullptr;
  if (!getErrorName || getErrorName(result, &name) != CUDA_SUCCESS || !name)
    return "CUDA error " + std::to_string(static_cast<int>(result));
  if (getErrorString && getErrorString(result, &what) == CUDA_SUCCESS && what)
    return std::string(name) + ": " + what;
  return name;
}

Result<const CuptiApi *> loadCupti() {
  static std::mutex mu;
  static const CuptiApi *loaded = nullptr;
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  Result<const CuptiApi *> result = load();
  if (result.isOk()) loaded = result.value();
  return result;
}

Result<const CudaDriverApi *> loadCudaDriver() {
  static std::mutex mu;
  static const CudaDriverApi *loaded = nullptr;
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    return Status{StatusCode::kUnavailable, std::string("[PROTON] libcuda.so.1 not loadable: ") +
                                                (err ? err : "unknown error")};
  }
  auto api = std::make_unique<CudaDriverApi>();
  std::string missing;
  resolve(handle, api->deviceGetCount, "cuDeviceGetCount", &missing);
  resolve(handle, api->deviceGet, "cuDeviceGet", &missing);
  resolve(handle, api->deviceGetAttribute, "cuDeviceGetAttribute", &missing);
  resolve(handle, api->ctxPushCurrent, "cuCtxPushCurrent_v2", &missing);
  resolve(handle, api->ctxPopCurrent, "cuCtxPopCurrent_v2", &missing);
  resolve(handle, api->ctxSynchronize, "cuCtxSynchronize", &missing);
  resolve(handle, api->ctxGetCurrent, "cuCtxGetCurrent", &missing);
  resolve(handle, api->ctxGetDevice, "cuCtxGetDevice", &missing);
  resolve(handle, api->memAlloc, "cuMemAlloc_v2", &missing);
  resolve(handle, api->streamIsCapturing, "cuStreamIsCapturing", &missing);
  resolve(handle, api->streamGetCtx, "cuStreamGetCtx", &missing);
  resolve(handle, api->devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &missing);
  resolve(handle, api->funcGetModule, "cuFuncGetModule", &missing);
  resolve(handle, api->moduleGetGlobal, "cuModuleGetGlobal_v2", &missing);
  resolve(handle, api->moduleLoadData, "cuModuleLoadData", &missing);
  resolve(handle, api->moduleGetFunction, "cuModuleGetFunction", &missing);
  resolve(handle, api->launchKernel, "cuLaunchKernel", &missing);
  resolve(handle, api->kernelGetLibrary, "cuKernelGetLibrary", &missing);
  resolve(handle, api->libraryGetGlobal, "cuLibraryGetGlobal", &missing);
  resolve(handle, api->memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", &missing);
  resolve(handle, api->memsetD8Async, "cuMemsetD8Async", &missing);
  resolve(handle, api->pointerGetAttribute, "cuPointerGetAttribute", &missing);
  resolve(handle, api->exchangeCaptureMode, "cuThreadExchangeStreamCaptureMode", &missing);
  resolve(handle, api->streamCreate, "cuStreamCreate", &missing);
  resolve(handle, api->streamSynchronize, "cuStreamSynchronize", &missing);
  resolve(handle, api->memFree, "cuMemFree_v2", &missing);
  resolve(handle, api->eventCreate, "cuEventCreate", &missing);
  resolve(handle, api->eventRecord, "cuEventRecord", &missing);
  resolve(handle, api->eventSynchronize, "cuEventSynchronize", &missing);
  resolve(handle, api->streamWaitEvent, "cuStreamWaitEvent", &missing);
  resolve(handle, api->eventDestroy, "cuEventDestroy_v2", &missing);
  resolve(handle, api->streamGetFlags, "cuStreamGetFlags", &missing);
  resolve(handle, api->memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &missing);
  resolve(handle, api->memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &missing);
  resolve(handle, api->memcpy2DAsync, "cuMemcpy2DAsync_v2", &missing);
  resolve(handle, api->streamGetCaptureInfo, "cuStreamGetCaptureInfo_v2", nullptr);
  resolve(handle, api->getErrorName, "cuGetErrorName", nullptr);
  resolve(handle, api->getErrorString, "cuGetErrorString", nullptr);
  if (!missing.empty()) {
    return Status{StatusCode::kUnavailable,
                  "[PROTON] libcuda.so.1 lacks symbols Proton needs: " + missing};
  }
  loaded = api.release();
  return loaded;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
