#include "backends/cupti/cupti_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/gpu_backend.h"

namespace proton::cupti {
namespace {

constexpr uint32_t kHeaderMajor = CUPTI_API_VERSION >= 10000 ? CUPTI_API_VERSION / 10000 : 12;

// Resolves `field` to `symbol`; a missing required symbol is added to `missing`.
template <typename Fn>
void resolve(void *handle, Fn &field, const char *symbol, std::string *missing) {
  field = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (!field && missing) *missing += std::string(missing->empty() ? "" : ", ") + symbol;
}

bool endsWithDir(const std::string &path) {
  DIR *d = opendir(path.c_str());
  if (d) closedir(d);
  return d != nullptr;
}

// Files in dir named libcupti.so.<major>*, best first.
std::vector<std::string> cuptiFilesIn(const std::string &dir) {
  std::vector<std::string> files;
  std::string exact = "libcupti.so." + std::to_string(kHeaderMajor);
  files.push_back(dir + "/" + exact);
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind(exact + ".", 0) == 0) files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  files.push_back(dir + "/libcupti.so");
  return files;
}

// The path of a libcupti already mapped into this process, if any.
std::string loadedCupti() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *out) {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        size_t slash = name.rfind('/');
        std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
        if (base.rfind("libcupti.so", 0) == 0) {
          *static_cast<std::string *>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

// Tries one candidate; on failure appends why to `tried` and returns nullptr.
CuptiApi *tryLoad(const std::string &path, bool viaLoaderPath, std::string &tried) {
  auto note = [&](const std::string &why) { tried += "\n  " + path + ": " + why; };
  if (!viaLoaderPath && path.find('/') != std::string::npos) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return nullptr;  // absent files are not worth listing
    std::fclose(f);
  }
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    if (!viaLoaderPath)
      note(err ? err : "dlopen failed");
    else
      note("not on the loader path");
    return nullptr;
  }
  auto api = std::make_unique<CuptiApi>();
  decltype(&::cuptiGetVersion) getVersion = nullptr;
  resolve(handle, getVersion, "cuptiGetVersion", nullptr);
  if (!getVersion || getVersion(&api->version) != CUPTI_SUCCESS) {
    note("not a usable CUPTI (cuptiGetVersion failed)");
    dlclose(handle);
    return nullptr;
  }
  if (cuptiMajor(api->version) != kHeaderMajor) {
    note("CUPTI API version " + std::to_string(api->version) + " is from CUDA " +
         std::to_string(cuptiMajor(api->version)) + "; this build of Proton needs CUDA " +
         std::to_string(kHeaderMajor) + "'s CUPTI");
    dlclose(handle);
    return nullptr;
  }
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
  resolve(handle, api->subscribeV2, "cuptiSubscribe_v2", nullptr);
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
  if (!missing.empty()) {
    note("missing symbols: " + missing);
    dlclose(handle);
    return nullptr;
  }
  api->path = path;
  if (path.find('/') == std::string::npos) {
    // Loaded by name: record which file the loader picked.
    if (std::string real = loadedCupti(); !real.empty()) api->path = real;
  }
  return api.release();  // kept for the life of the process
}

Result<const CuptiApi *> load() {
  std::string tried;
  auto attempt = [&](const std::string &path, bool viaLoaderPath = false) {
    return tryLoad(path, viaLoaderPath, tried);
  };
  auto attemptDir = [&](const std::string &dir) -> CuptiApi * {
    for (const std::string &file : cuptiFilesIn(dir))
      if (CuptiApi *api = attempt(file)) return api;
    return nullptr;
  };
  if (const char *env = std::getenv("PROTON_CUPTI_LIB_PATH"); env && *env) {
    std::string p = env;
    CuptiApi *api = endsWithDir(p) ? attemptDir(p) : attempt(p);
    if (api) return static_cast<const CuptiApi *>(api);
    if (tried.empty()) tried += "\n  " + p + ": no libcupti there";
  }
  if (std::string loaded = loadedCupti(); !loaded.empty())
    if (CuptiApi *api = attempt(loaded)) return static_cast<const CuptiApi *>(api);
  for (const std::string &dir : librarySearchDirs())
    if (CuptiApi *api = attemptDir(dir)) return static_cast<const CuptiApi *>(api);
  std::vector<std::string> toolkits;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home) toolkits.push_back(home);
  if (const char *path = std::getenv("CUDA_PATH"); path && *path) toolkits.push_back(path);
  toolkits.push_back("/usr/local/cuda");
  for (const std::string &root : toolkits) {
    for (const char *sub : {"/extras/CUPTI/lib64", "/lib64", "/targets/x86_64-linux/lib"})
      if (CuptiApi *api = attemptDir(root + sub)) return static_cast<const CuptiApi *>(api);
  }
  std::string name = "libcupti.so." + std::to_string(kHeaderMajor);
  if (CuptiApi *api = attempt(name, true)) return static_cast<const CuptiApi *>(api);
  return Status{StatusCode::kUnavailable,
                "[PROTON] No usable CUPTI library (CUDA " + std::to_string(kHeaderMajor) +
                    ", libcupti.so." + std::to_string(kHeaderMajor) +
                    ") was found. Install the CUDA toolkit or the NVIDIA CUPTI wheel "
                    "(pip install nvidia-cuda-cupti), or set PROTON_CUPTI_LIB_PATH to the "
                    "library or its directory. Tried:" +
                    (tried.empty() ? std::string("\n  (no candidate found)") : tried)};
}

}  // namespace

uint32_t cuptiMajor(uint32_t apiVersion) {
  // CUPTI 13 numbers its API 130000 and up; CUDA 12's CUPTI used small integers (18..26).
  return apiVersion >= 10000 ? apiVersion / 10000 : 12;
}

std::string CuptiApi::errorString(CUptiResult result) const {
  const char *text = nullptr;
  if (getResultString && getResultString(result, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI error " + std::to_string(static_cast<int>(result));
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
  resolve(handle, api->memsetD8, "cuMemsetD8_v2", &missing);
  resolve(handle, api->memcpyDtoH, "cuMemcpyDtoH_v2", &missing);
  resolve(handle, api->streamIsCapturing, "cuStreamIsCapturing", &missing);
  resolve(handle, api->memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", &missing);
  resolve(handle, api->pointerGetAttribute, "cuPointerGetAttribute", &missing);
  resolve(handle, api->exchangeCaptureMode, "cuThreadExchangeStreamCaptureMode", &missing);
  resolve(handle, api->streamGetCaptureInfo, "cuStreamGetCaptureInfo_v2", nullptr);
  if (!missing.empty()) {
    return Status{StatusCode::kUnavailable,
                  "[PROTON] libcuda.so.1 lacks symbols Proton needs: " + missing};
  }
  loaded = api.release();
  return loaded;
}

}  // namespace proton::cupti
