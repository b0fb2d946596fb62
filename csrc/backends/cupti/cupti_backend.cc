#include "backends/cupti/cupti_backend.h"

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/capture_registry.h"
#include "backends/cupti/context_failures.h"
#include "backends/cupti/cuda_devices.h"
#include "backends/cupti/cuda_driver.h"
#include "backends/cupti/cupti_dispatch.h"
#include "backends/cupti/cupti_graphs.h"
#include "backends/cupti/cupti_loader.h"
#include "backends/cupti/cupti_pc_sampler.h"
#include "backends/cupti/cupti_pc_translate.h"
#include "backends/cupti/cupti_translate.h"
#include "backends/gpu/capture_watch.h"
#include "backends/gpu/device_metric_buffers.h"
#include "backends/gpu/graph_slots.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/gpu/native_scopes.h"
#include "backends/gpu/replay_order.h"
#include "backends/kernel_attributor.h"
#include "backends/launch_table.h"
#include "backends/pc_sample_attributor.h"
#include "core/backend_host.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/device_info.h"
#include "core/periodic_task.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

using gpu::CaptureWatch;
using gpu::DeviceMetricBuffers;
using gpu::IntraKernelBuffers;
using gpu::NativeScopes;
using gpu::ReplayOrder;

// CUDA's handles as the GPU-side logic's (backends/gpu/gpu_driver.h): the same addresses.
gpu::Context neutral(CUcontext context) { return reinterpret_cast<gpu::Context>(context); }
gpu::Stream neutral(CUstream stream) { return reinterpret_cast<gpu::Stream>(stream); }

Counter &statCounter(const char *name) { return Stats::global().counter(name); }

thread_local CUcontext tlsLastContext = nullptr;        // the context this thread launched on last
thread_local uint64_t tlsContextsEnded = 0;             // contextsEnded as it was then
thread_local std::vector<StringId> *tlsNvtx = nullptr;  // open NVTX ranges, innermost last

// nvtxRangePushA / nvtxRangePushEx parameter blocks (layouts of generated_nvtx_meta.h).
struct NvtxPushAParams {
  const char *message;
};
struct NvtxPushExParams {
  const nvtxEventAttributes_t *eventAttrib;
};

uint64_t CUPTIAPI timestampNs() { return monotonicNs(); }

class CuptiBackend final : public GpuBackend {
 public:
  static CuptiBackend &instance() {
    static CuptiBackend *backend = new CuptiBackend();  // never destroyed: callbacks may race exit
    return *backend;
  }

  const char *name() const override { return "cupti"; }
  Status acquire(Session &session) override;
  void release(Session &session) override;
  void flush() override { flush(kCaptureWait); }
  Status allocateInstrumented(size_t bytes, bool trace, uint64_t stream, uint64_t *devicePtr);
  static void onInstrumentedRecord(const KernelRecord &record, const LaunchEntry *filedUnder,
                                   size_t n, StringId launchName);

  static void CUPTIAPI onCallback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const void *data) noexcept;
  static void CUPTIAPI onBufferRequested(uint8_t **buffer, size_t *size,
                                         size_t *maxNumRecords) noexcept;
  static void CUPTIAPI onBufferCompleted(CUcontext context, uint32_t streamId, uint8_t *buffer,
                                         size_t size, size_t validSize) noexcept;

 private:
  CuptiBackend() : tracker_(launches_, captures_), attributor_(launches_, captures_) {
    freeBuffers_.reserve(kKeptBuffers);
    for (const char *name :
         {"activity_buffers_unavailable", "activity_records_dropped", "cupti_callback_errors",
          "nvtx_ranges_unmatched", "flush_timeouts", "flush_syncs_skipped_for_captures",
          "graph_replays_unordered", "gpu_contexts_failed"})
      statCounter(name);
  }

  Status start();                                               // mu_ held
  void stop();                                                  // mu_ held
  Status startSampling(Session &session, uint32_t periodLog2);  // mu_ held
  void stopSampling(Session &session);                          // mu_ held
  CUptiResult subscribe(std::string &holder);  // `holder`: who holds CUPTI, when it says
  Status enableCallbacks();
  // A flush waits this long, at most, for other threads' captures before it synchronises.
  static constexpr std::chrono::milliseconds kCaptureWait{10000};
  void flush(std::chrono::milliseconds captureWait);
  void flushLocked(std::chrono::milliseconds captureWait = kCaptureWait);
  // The contexts it synchronised are kept in synced_ (not those where a capture was under way).
  void syncContexts(std::chrono::milliseconds captureWait);
  // A full ring with trace slots: its launches, their kernel records, then the drain.
  void drainFullTrace();

  void onLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
  void onResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data);
  void onStreamCall(const CUpti_CallbackData *cb, const StreamCallback &call);
  // Stream callbacks on while the backend runs (capture begins, ends, stream destroys) or an
  // instrumentation session does (joins); a CUPTI that refuses one is not fatal. mu_ held.
  void enableStreamCallbacks(bool joins, bool enable);
  void onNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *data);
  void noteContext(CUcontext context);
  uint8_t *takeBuffer();
  void giveBuffer(uint8_t *buffer);
  void processBuffer(CUcontext context, uint32_t streamId, uint8_t *buffer, size_t validSize);

  std::mutex mu_;  // acquire/release/flush
  int users_ = 0;
  const CuptiApi *api_ = nullptr;
  const CudaDriverApi *driver_ = nullptr;
  const gpu::Driver *gpuDriver_ = nullptr;  // driver_ for the GPU-side logic
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool emptyLaunchCallbacks_ = false;  // benchmarks only (enableCallbacks)

  LaunchTable launches_;
  CaptureRegistry captures_;
  LaunchTracker tracker_;
  std::mutex processMu_;  // one activity buffer at a time
  KernelAttributor attributor_;
  // Instruction sampling (mode="pcsampling"), shared by every sampling session.
  PcSampleAttributor samples_{attributor_};
  PcSampler sampler_{samples_, processMu_};
  PeriodicTask recordPump_;  // hands finished kernel records over while the backend runs
  int samplingUsers_ = 0;    // mu_

  std::mutex poolMu_;  // taken once per activity buffer, never per launch
  std::vector<uint8_t *> freeBuffers_;
  size_t buffersAlive_ = 0;

  std::mutex contextMu_;  // taken when a thread launches on a context new to it
  std::vector<CUcontext> contexts_;
  // Contexts destroyed so far: a context made after one was destroyed may get its handle, so
  // a thread's last context is new to it again (its thread-local copy is another thread's).
  std::atomic<uint64_t> contextsEnded_{0};
  // Captures under way: a flush waits for them to end before it synchronises a context.
  CaptureWatch captureWatch_;
  std::vector<gpu::Context> synced_;  // mu_: the contexts the last flush synchronised
  // The instrumentation's drains mark streams before they retire (an instrumentation session
  // runs). Read by the capture callbacks, which are on in every session.
  std::atomic<bool> retiringOn_{false};
};

// ---- lifecycle -------------------------------------------------------------------------

Status CuptiBackend::acquire(Session &session) {
  bool sampling = PcSampleAttributor::samples(session);
  uint32_t periodLog2 = 0;
  if (sampling) {
    if (session.options().data != DataKind::kTree)
      return {StatusCode::kInvalidArgument,
              "[PROTON] mode='pcsampling' files samples under the kernels of a calling-context "
              "tree: use data='tree' (the default), not data='" +
                  std::string(dataKindName(session.options().data)) + "'."};
    Result<uint32_t> period = samplingPeriodLog2(session.options().mode);
    if (!period.isOk()) return period.status();
    periodLog2 = period.value();
  }
  std::lock_guard lock(mu_);
  if (users_ == 0) PROTON_RETURN_IF_ERROR(start());
  ++users_;
  if (session.options().backend == BackendKind::kInstrumentation) {
    if (!IntraKernelBuffers::global().inUse()) enableStreamCallbacks(/*joins=*/true, true);
    IntraKernelBuffers::global().addUser();
    NativeScopes::global().start(gpuDriver_);
    std::lock_guard processLock(processMu_);
    attributor_.observeRecords(&CuptiBackend::onInstrumentedRecord);
  }
  if (!sampling) return {};
  Status status = startSampling(session, periodLog2);
  if (!status.isOk()) {
    if (--users_ == 0) stop();
    return status;
  }
  ++samplingUsers_;
  return {};
}

Status CuptiBackend::startSampling(Session &session, uint32_t periodLog2) {
  if (sampler_.running()) {
    if (sampler_.periodLog2() != periodLog2)
      std::fprintf(stderr,
                   "[PROTON] mode='%s': another session already samples every 2^%u cycles; "
                   "the GPU takes one sampling period per process, so this session shares it.\n",
                   session.options().mode.toString().c_str(), sampler_.periodLog2());
    return {};
  }
  std::vector<CUcontext> contexts;
  {
    std::lock_guard lock(contextMu_);
    contexts = contexts_;
  }
  CUcontext current = nullptr;
  if (driver_->ctxGetCurrent(&current) == CUDA_SUCCESS && current &&
      std::find(contexts.begin(), contexts.end(), current) == contexts.end())
    contexts.push_back(current);
  {
    std::lock_guard lock(processMu_);
    attributor_.sampleKernelsInto(&samples_);
  }
  Status status = sampler_.start(*api_, periodLog2, contexts);
  if (!status.isOk()) {
    std::lock_guard lock(processMu_);
    attributor_.sampleKernelsInto(nullptr);
  }
  return status;
}

void CuptiBackend::stopSampling(Session &session) {
  if (samplingUsers_ > 0 && --samplingUsers_ == 0) {
    sampler_.stop();
    std::lock_guard lock(processMu_);
    attributor_.sampleKernelsInto(nullptr);
  }
  std::lock_guard lock(processMu_);
  samples_.forgetSession(session);
}

void CuptiBackend::release(Session &session) {
  std::lock_guard lock(mu_);
  if (PcSampleAttributor::samples(session)) stopSampling(session);
  if (session.options().backend == BackendKind::kInstrumentation) {
    IntraKernelBuffers &buffers = IntraKernelBuffers::global();
    buffers.removeUser();
    if (!buffers.inUse()) {
      enableStreamCallbacks(/*joins=*/true, false);
      NativeScopes::global().stop();
      std::lock_guard processLock(processMu_);
      attributor_.observeRecords(nullptr);
    }
  }
  if (users_ > 0 && --users_ == 0) stop();
}

void CuptiBackend::flush(std::chrono::milliseconds captureWait) {
  std::lock_guard lock(mu_);
  if (users_ == 0) return;
  flushLocked(captureWait);
  sampler_.collect();  // after the kernels: their samples need their frames
  // Every tensor metric copy given before the synchronisation has completed, in the contexts
  // it synchronised (a capture may keep one from it: see syncContexts); the others wait.
  DeviceMetricBuffers::global().drain(synced_);
  // Every instrumented launch has finished and its record was filed: its buffers can be read
  // (a ring waits for its launches' streams itself).
  IntraKernelBuffers::global().drain(*gpuDriver_);
  NativeScopes::global().drain(synced_);
}

void CuptiBackend::onInstrumentedRecord(const KernelRecord &record, const LaunchEntry *filedUnder,
                                        size_t n, StringId launchName) {
  IntraKernelBuffers::global().noteKernel(record.correlation, record.startNs);
  NativeScopes::global().noteKernel(record, filedUnder, n, launchName);
}

Status CuptiBackend::allocateInstrumented(size_t bytes, bool trace, uint64_t stream,
                                          uint64_t *devicePtr) {
  *devicePtr = 0;
  if (!driver_) return {};
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  using Alloc = IntraKernelBuffers::Alloc;
  Alloc result = buffers.allocate(*gpuDriver_, bytes, trace, stream, devicePtr);
  if (result != Alloc::kFull) return {};
  // The ring is full: wait for the GPU and reduce (tree slots), or flush the kernel records
  // that trace slices are aligned to. The launching thread waits (counted: the program's cost)
  // but not for the decoding and filing, which go on beside the program.
  uint64_t t0 = monotonicNs();
  if (trace)
    drainFullTrace();
  else
    buffers.drain(*gpuDriver_, /*waitForFiling=*/false);
  statCounter("instrumentation_ring_full_wait_us").add((monotonicNs() - t0) / 1000);
  if (buffers.allocate(*gpuDriver_, bytes, trace, stream, devicePtr) == Alloc::kFull)
    statCounter("instrumentation_launches_unrecorded").add();
  return {};
}

void CuptiBackend::drainFullTrace() {
  // Not flush(): the ring's launches are waited for on their streams, not by synchronising
  // the contexts, which would end a CUDA graph being captured on another thread; and only
  // their kernel records are waited for, not every launch's.
  std::lock_guard lock(mu_);
  if (users_ == 0) return;
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  buffers.waitForRings(*gpuDriver_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  api_->activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  while (!buffers.traceStartsKnown() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    api_->activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  if (!buffers.traceStartsKnown()) statCounter("flush_timeouts").add();
  buffers.drain(*gpuDriver_, /*waitForFiling=*/false);
}

Status CuptiBackend::start() {
  Result<const CuptiApi *> api = loadCupti();
  if (!api.isOk()) return api.status();
  Result<const CudaDriverApi *> driver = loadCudaDriver();
  if (!driver.isOk()) return driver.status();
  api_ = api.value();
  driver_ = driver.value();
  gpuDriver_ = cudaDriver(driver_);
  tracker_.setNodeIdFn(api_->getGraphNodeId);
  // A full tensor metric ring flushes on the thread giving a value, which may hold Python's GIL
  // that a capture on another thread needs to end: that flush does not wait for captures.
  DeviceMetricBuffers::global().setDriver(
      gpuDriver_, [] { instance().flush(std::chrono::milliseconds(0)); },
      [] {
        return static_cast<gpu::Stream>(const_cast<void *>(instance().captureWatch_.ownCapture()));
      });
  IntraKernelBuffers::global().setDriver(gpuDriver_);
  // A drain waiting for a whole context (under the buffers' lock, which capturing threads'
  // launches take: so it does not wait for their captures) synchronises only while none runs.
  IntraKernelBuffers::global().setContextSync([](gpu::Context context) {
    return instance().captureWatch_.whenNoCapture(context, std::chrono::milliseconds(0), [context] {
      noteContextSync(*instance().driver_, reinterpret_cast<CUcontext>(context),
                      instance().driver_->ctxSynchronize());
    }) == CaptureWatch::Outcome::kRan;
  });
  // Slots captured into graphs are copied out at each replay, in order (graph_slots.h).
  tracker_.setGraphLaunchFns(
      [](CUgraphExec exec, CUstream stream) {
        gpu::graphLaunchEntering(*instance().gpuDriver_, reinterpret_cast<gpu::GraphExec>(exec),
                                 neutral(stream));
      },
      [](CUgraphExec exec, CUstream stream, const LaunchEntry *entries, size_t n, uint64_t launchNs,
         uint64_t threadId, bool ran) {
        gpu::graphLaunchReturned(*instance().gpuDriver_, reinterpret_cast<gpu::GraphExec>(exec),
                                 neutral(stream), entries, n, launchNs, threadId, ran);
      });

  std::string holder;
  CUptiResult rc = subscribe(holder);
  if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = holder.empty() ? std::string() : " (" + holder + ")";
    return {StatusCode::kBusy,
            "[PROTON] Cannot start the CUPTI backend: another CUPTI client already holds this "
            "process" +
                who +
                ". This happens under torch.profiler with CUDA activities, also after its "
                "block has ended (PyTorch keeps CUPTI for the rest of the process), under "
                "Nsight Systems, Nsight Compute, cuda-gdb or compute-sanitizer. Profile in a "
                "separate process, or stop the other profiler first. The program continues "
                "without Proton's GPU profile."};
  }
  if (rc != CUPTI_SUCCESS) {
    return {StatusCode::kUnavailable,
            "[PROTON] cuptiSubscribe failed (" + api_->errorString(rc) + ") using " + api_->path};
  }
  Status status = enableCallbacks();
  if (status.isOk()) {
    // Kernel timestamps on Proton's own clock, so trace slices line up with CPU scopes.
    if (api_->registerTimestampCallback) api_->registerTimestampCallback(&timestampNs);
    rc = api_->activityRegisterCallbacks(&CuptiBackend::onBufferRequested,
                                         &CuptiBackend::onBufferCompleted);
    if (rc == CUPTI_SUCCESS) rc = api_->activityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (rc != CUPTI_SUCCESS)
      status = {StatusCode::kUnavailable,
                "[PROTON] Enabling CUPTI kernel tracing failed: " + api_->errorString(rc)};
  }
  if (!status.isOk()) {
    api_->unsubscribe(subscriber_);
    subscriber_ = nullptr;
    return status;
  }
  // Records reach us within 100 ms even when buffers are far from full, which bounds how
  // far the correlation table must look back and lets phases complete promptly.
  if (api_->activityFlushPeriod) api_->activityFlushPeriod(100);
  // That period alone did not hand over kernel records whose times CUPTI had not collected
  // (on an H100, CUDA 13: not in a second), and a fault in their context then took the times
  // of every kernel since the last flush. A flush that does not force them out collects them,
  // once a second (every 100 ms cost a launch-bound loop 1-3%): not beside a flush, start or
  // stop of Proton's (mu_), nor while a graph is being captured. Benchmarks only:
  // PROTON_CUPTI_RECORD_PUMP=0 leaves it off.
  const char *pump = std::getenv("PROTON_CUPTI_RECORD_PUMP");
  if (!pump || std::strcmp(pump, "0") != 0)
    recordPump_.start(std::chrono::milliseconds(1000), [this] {
      std::unique_lock lock(mu_, std::try_to_lock);
      if (lock && launches_.outstanding() > 0 && captureWatch_.underWay() == 0)
        api_->activityFlushAll(0);
    });
  noteCudaDevices(*driver_);
  setDeviceMetricSink(&DeviceMetricBuffers::global());
  return {};
}

CUptiResult CuptiBackend::subscribe(std::string &holder) {
#if PROTON_CUPTI_MAJOR >= 13
  if (api_->subscribeV2) {  // names us, and tells who holds CUPTI when it is taken
    char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {0};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "Proton";
    params.oldSubscriberName = name;
    params.oldSubscriberSize = sizeof(name) - 1;
    CUptiResult rc = api_->subscribeV2(&subscriber_, &CuptiBackend::onCallback, nullptr, &params);
    holder = name;
    return rc;
  }
#endif
  (void)holder;  // CUDA 12's CUPTI does not say who holds it
  return api_->subscribe(&subscriber_, &CuptiBackend::onCallback, nullptr);
}

Status CuptiBackend::enableCallbacks() {
  auto check = [&](CUptiResult rc, const char *what) -> Status {
    if (rc == CUPTI_SUCCESS) return {};
    return {StatusCode::kUnavailable, std::string("[PROTON] Enabling CUPTI callbacks for ") + what +
                                          " failed: " + api_->errorString(rc)};
  };
  // Benchmarks only: kernel tracing without launch callbacks measures CUPTI's own floor
  // (every record is then unmatched and counted as such); PROTON_CUPTI_LAUNCH_CALLBACKS=empty
  // subscribes them but returns at once: CUPTI's own cost of calling us.
  const char *floor = std::getenv("PROTON_CUPTI_NO_LAUNCH_CALLBACKS");
  const char *which = std::getenv("PROTON_CUPTI_LAUNCH_CALLBACKS");
  bool launches = !floor || std::strcmp(floor, "1") != 0;
  emptyLaunchCallbacks_ = which && std::strcmp(which, "empty") == 0;
  for (size_t i = 0; launches && i < kNumRuntimeLaunchCallbacks; ++i)
    PROTON_RETURN_IF_ERROR(check(api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                                                      kRuntimeLaunchCallbacks[i]),
                                 "runtime launches"));
  for (size_t i = 0; launches && i < kNumDriverLaunchCallbacks; ++i)
    PROTON_RETURN_IF_ERROR(check(
        api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunchCallbacks[i]),
        "driver launches"));
  for (CUpti_CallbackId cbid :
       {CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, CUPTI_CBID_RESOURCE_MODULE_LOADED,
        CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
        CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, CUPTI_CBID_RESOURCE_GRAPH_CLONED,
        CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
        CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING})
    PROTON_RETURN_IF_ERROR(
        check(api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, cbid), "resources"));
  for (size_t i = 0; i < kNumDriverGraphUpdateCallbacks; ++i)  // captured slots follow them
    PROTON_RETURN_IF_ERROR(check(api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API,
                                                      kDriverGraphUpdateCallbacks[i]),
                                 "graph updates"));
  for (size_t i = 0; i < kNumDriverUnloadCallbacks; ++i)  // native scopes' names
    PROTON_RETURN_IF_ERROR(check(
        api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, kDriverUnloadCallbacks[i]),
        "module unloads"));
  // Capture begins and ends, for flushes (kernel tracing needs them as much as instrumentation).
  enableStreamCallbacks(/*joins=*/false, true);
  const char *nvtx = std::getenv("PROTON_ENABLE_NVTX");
  if (!nvtx || std::strcmp(nvtx, "0") != 0) {
    // NVTX forwards ranges to the library named here, read at the program's first NVTX call.
    setenv("NVTX_INJECTION64_PATH", api_->path.c_str(), /*overwrite=*/0);
    for (CUpti_CallbackId cbid : {CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushEx,
                                  CUPTI_CBID_NVTX_nvtxRangePop})
      PROTON_RETURN_IF_ERROR(
          check(api_->enableCallback(1, subscriber_, CUPTI_CB_DOMAIN_NVTX, cbid), "NVTX"));
  }
  return {};
}

void CuptiBackend::stop() {
  recordPump_.stop();
  flushLocked();
  DeviceMetricBuffers::global().drain(synced_);
  setDeviceMetricSink(nullptr);
  sampler_.stop();
  api_->activityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  api_->activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  api_->enableDomain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
  api_->enableDomain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
  api_->enableDomain(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE);
  api_->enableDomain(0, subscriber_, CUPTI_CB_DOMAIN_NVTX);
  ReplayOrder::global().releaseAll();  // no graph launch's exit comes from now on
  api_->unsubscribe(subscriber_);
  subscriber_ = nullptr;
  captureWatch_.clear();  // no callback says when the captures under way end from now on
  captures_.clear();
}

void CuptiBackend::syncContexts(std::chrono::milliseconds captureWait) {
  std::vector<CUcontext> contexts;
  {
    std::lock_guard lock(contextMu_);
    contexts = contexts_;
  }
  // Tensor metric values may sit in a context no kernel was launched in.
  for (gpu::Context held : DeviceMetricBuffers::global().contexts())
    if (auto context = reinterpret_cast<CUcontext>(held);
        std::find(contexts.begin(), contexts.end(), context) == contexts.end())
      contexts.push_back(context);
  // A synchronisation ends every capture on its context, on any thread: wait for other
  // threads' captures to end (those that begin meanwhile wait for it; one limit for all the
  // contexts), never synchronise under the flushing thread's own (skipped, the flush only waits
  // for CUPTI's records of the launches so far), in relaxed capture mode.
  gpu::RelaxedCaptureMode relaxed(*gpuDriver_);
  const auto deadline = std::chrono::steady_clock::now() + captureWait;
  synced_.clear();
  for (CUcontext context : contexts) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    bool synced = false;
    CaptureWatch::Outcome outcome =
        captureWatch_.whenNoCapture(context, std::max(left, std::chrono::milliseconds(0)), [&] {
          if (driver_->ctxPushCurrent(context) != CUDA_SUCCESS) return;
          noteContextSync(*driver_, context, driver_->ctxSynchronize());  // the program's
          CUcontext popped;
          driver_->ctxPopCurrent(&popped);
          synced = true;
        });
    if (outcome != CaptureWatch::Outcome::kRan)
      statCounter("flush_syncs_skipped_for_captures").add();
    if (synced) synced_.push_back(neutral(context));
  }
}

void CuptiBackend::flushLocked(std::chrono::milliseconds captureWait) {
  // Graphs destroyed before now: the records of their replays are all filed by the end.
  uint64_t retired = captures_.retiredMark();
  // The launches made before the synchronisation: those this flush owes records for. Other
  // threads may launch all along; waiting for no launch to be outstanding would wait for them.
  const int64_t owed = launches_.recordedSoFar();
  DeviceMetricBuffers::global().beforeSync();
  NativeScopes::global().beforeSync();
  syncContexts(captureWait);
  api_->activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  // Every kernel has finished; its record may still be on its way through CUPTI.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (launches_.settledSoFar() < owed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    api_->activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  if (launches_.settledSoFar() < owed) statCounter("flush_timeouts").add();
  captures_.forgetRetired(retired);
}

// ---- callbacks (noexcept trampolines) --------------------------------------------------

void CUPTIAPI CuptiBackend::onCallback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       const void *data) noexcept {
  try {
    CuptiBackend &self = instance();
    switch (domain) {
      case CUPTI_CB_DOMAIN_RUNTIME_API:
      case CUPTI_CB_DOMAIN_DRIVER_API:
        if (const StreamCallback *call = streamCall(domain, cbid); PROTON_UNLIKELY(call)) {
          self.onStreamCall(static_cast<const CUpti_CallbackData *>(data), *call);
          break;
        }
        if (PROTON_UNLIKELY(isGraphExecUpdate(domain, cbid))) {
          onGraphExecUpdate(static_cast<const CUpti_CallbackData *>(data));
          break;
        }
        if (PROTON_UNLIKELY(isModuleUnload(domain, cbid))) {
          const auto *cb = static_cast<const CUpti_CallbackData *>(data);
          if (cb->callbackSite == CUPTI_API_ENTER && cb->functionParams)
            NativeScopes::global().onModuleUnloading(
                *static_cast<void *const *>(cb->functionParams));
          break;
        }
        if (self.emptyLaunchCallbacks_) break;
        self.onLaunch(domain, cbid, static_cast<const CUpti_CallbackData *>(data));
        break;
      case CUPTI_CB_DOMAIN_RESOURCE:
        self.onResource(cbid, static_cast<const CUpti_ResourceData *>(data));
        break;
      case CUPTI_CB_DOMAIN_NVTX:
        self.onNvtx(cbid, static_cast<const CUpti_NvtxData *>(data));
        break;
      default:
        break;
    }
  } catch (...) {
    statCounter("cupti_callback_errors").add();
  }
}

void CuptiBackend::noteContext(CUcontext context) {
  tlsLastContext = context;
  tlsContextsEnded = contextsEnded_.load(std::memory_order_acquire);  // before the look-up
  {
    std::lock_guard lock(contextMu_);
    for (CUcontext c : contexts_)
      if (c == context) return;
    contexts_.push_back(context);
  }
  sampler_.addContext(context);  // nothing unless sampling; once per context
}

void CuptiBackend::onLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const CUpti_CallbackData *cb) {
  if (cb->callbackSite == CUPTI_API_ENTER && cb->context &&
      PROTON_UNLIKELY(cb->context != tlsLastContext ||
                      tlsContextsEnded != contextsEnded_.load(std::memory_order_relaxed)))
    noteContext(cb->context);
  tracker_.onLaunch(domain, cbid, cb);
}

void CuptiBackend::onStreamCall(const CUpti_CallbackData *cb, const StreamCallback &call) {
  if (!cb->functionParams) return;
  CUstream stream = *static_cast<const CUstream *>(cb->functionParams);
  if (!stream && call.perThread) stream = CU_STREAM_PER_THREAD;
  const bool begins = call.kind == StreamCall::kCaptureBegins;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (begins) captureWatch_.beginning(cb->context, stream);
    if (call.kind == StreamCall::kDestroyed)
      ReplayOrder::global().onStreamDestroying(neutral(stream));
    // Before the call: what was launched on the stream until now can still be waited for.
    if (call.kind != StreamCall::kCaptureEnds && retiringOn_.load(std::memory_order_relaxed))
      IntraKernelBuffers::global().onStreamRetiring(neutral(stream), begins);
    return;
  }
  if (call.kind == StreamCall::kJoins) return;
  // After a begin (which may have failed), an end or a destroy: is the stream capturing now?
  // Not asked of the legacy stream, which cannot capture (and asking may be refused), nor of
  // a stream just destroyed; a begin whose answer is an error counts as a capture.
  bool capturing = false;
  if (begins && stream && stream != CU_STREAM_LEGACY) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    capturing = driver_->streamIsCapturing(stream, &status) != CUDA_SUCCESS ||
                status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  captureWatch_.settled(stream, capturing);
}

void CuptiBackend::enableStreamCallbacks(bool joins, bool enable) {
  if (joins) retiringOn_.store(enable, std::memory_order_relaxed);
  auto on = [&](CUpti_CallbackDomain domain, const StreamCallback &callback) {
    if ((callback.kind == StreamCall::kJoins) == joins)
      api_->enableCallback(enable, subscriber_, domain, callback.cbid);
  };
  for (size_t i = 0; i < kNumRuntimeStreamCallbacks; ++i)
    on(CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeStreamCallbacks[i]);
  for (size_t i = 0; i < kNumDriverStreamCallbacks; ++i)
    on(CUPTI_CB_DOMAIN_DRIVER_API, kDriverStreamCallbacks[i]);
}

void CuptiBackend::onResource(CUpti_CallbackId cbid, const CUpti_ResourceData *data) {
  if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    const auto *module = static_cast<const CUpti_ModuleResourceData *>(data->resourceDescriptor);
    if (module) sampler_.onModuleLoaded(data->context, module->pCubin, module->cubinSize);
    return;
  }
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    sampler_.removeContext(data->context);
    {
      std::lock_guard lock(contextMu_);  // first: a flush no longer synchronises it
      std::erase(contexts_, data->context);
      contextsEnded_.fetch_add(1, std::memory_order_release);  // every thread's copy is stale
    }
    NativeScopes::global().onContextDestroying(neutral(data->context));
    IntraKernelBuffers::global().onContextDestroying(neutral(data->context));
    DeviceMetricBuffers::global().onContextDestroying(neutral(data->context));
    ReplayOrder::global().onContextDestroying(neutral(data->context));
    return;
  }
  if (onGraphSlotsResource(cbid, data)) return;
  tracker_.onGraphResource(cbid, data);
}

void CuptiBackend::onNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *data) {
  BackendHost &host = BackendHost::get();
  if (cbid == CUPTI_CBID_NVTX_nvtxRangePop) {
    if (!tlsNvtx || tlsNvtx->empty()) return;
    StringId name = tlsNvtx->back();
    tlsNvtx->pop_back();
    // A Proton scope opened inside the range and still open: leave both as they are.
    if (!host.exitRange(name).isOk()) statCounter("nvtx_ranges_unmatched").add();
    return;
  }
  if (!host.profilingOn() || !data->functionParams) return;
  const char *message = nullptr;
  if (cbid == CUPTI_CBID_NVTX_nvtxRangePushA) {
    message = static_cast<const NvtxPushAParams *>(data->functionParams)->message;
  } else if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx) {
    const nvtxEventAttributes_t *attr =
        static_cast<const NvtxPushExParams *>(data->functionParams)->eventAttrib;
    if (attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII) message = attr->message.ascii;
  }
  if (!message) message = "<nvtx range>";
  StringId name = StringTable::global().intern(message);
  if (!host.enterRange(name).isOk()) return;
  if (!tlsNvtx) tlsNvtx = new std::vector<StringId>();  // per thread, lives with the thread
  tlsNvtx->push_back(name);
}

// ---- activity buffers ------------------------------------------------------------------

uint8_t *CuptiBackend::takeBuffer() {
  std::lock_guard lock(poolMu_);
  if (!freeBuffers_.empty()) {
    uint8_t *b = freeBuffers_.back();
    freeBuffers_.pop_back();
    return b;
  }
  if (buffersAlive_ >= kMaxBuffers) return nullptr;
  // Mapped directly, so that a buffer given back past kKeptBuffers returns to the system:
  // memory follows the records in flight, not the largest burst ever seen.
  void *b = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) return nullptr;
  ++buffersAlive_;
  return static_cast<uint8_t *>(b);
}

void CuptiBackend::giveBuffer(uint8_t *buffer) {
  std::lock_guard lock(poolMu_);
  if (freeBuffers_.size() < kKeptBuffers) {
    freeBuffers_.push_back(buffer);  // capacity reserved up front: no allocation here
    return;
  }
  munmap(buffer, kBufferBytes);
  --buffersAlive_;
}

void CUPTIAPI CuptiBackend::onBufferRequested(uint8_t **buffer, size_t *size,
                                              size_t *maxNumRecords) noexcept {
  *maxNumRecords = 0;
  *buffer = nullptr;
  *size = 0;
  try {
    *buffer = instance().takeBuffer();
  } catch (...) {
  }
  if (*buffer) {
    *size = kBufferBytes;
  } else {
    statCounter("activity_buffers_unavailable").add();
  }
}

void CUPTIAPI CuptiBackend::onBufferCompleted(CUcontext context, uint32_t streamId, uint8_t *buffer,
                                              size_t, size_t validSize) noexcept {
  CuptiBackend &self = instance();
  try {
    self.processBuffer(context, streamId, buffer, validSize);
  } catch (...) {
    statCounter("cupti_callback_errors").add();
  }
  if (buffer) self.giveBuffer(buffer);
}

void CuptiBackend::processBuffer(CUcontext context, uint32_t streamId, uint8_t *buffer,
                                 size_t validSize) {
  std::lock_guard lock(processMu_);
  if (buffer && validSize > 0) {
    CUpti_Activity *record = nullptr;
    KernelRecord kernel;
    while (api_->activityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS)
      if (translateKernel(record, kernel)) attributor_.add(kernel);
  }
  size_t dropped = 0;
  if (api_->activityGetNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS &&
      dropped > 0)
    statCounter("activity_records_dropped").add(dropped);
}

GpuBackend *backend() { return &CuptiBackend::instance(); }

Status allocateInstrumentationBuffer(size_t bytes, bool trace, uint64_t stream,
                                     uint64_t *devicePtr) {
  try {  // called from Triton's launcher: nothing may reach the program's launch
    return CuptiBackend::instance().allocateInstrumented(bytes, trace, stream, devicePtr);
  } catch (const std::exception &) {  // no memory in a drain: this launch records nothing
    *devicePtr = 0;
    statCounter("instrumentation_launches_unrecorded").add();
    return {};
  }
}

Status registerInstrumentationTable(std::string_view text) {
  Result<instrumentation::ScopeTable> table = instrumentation::decodeTable(text);
  if (!table.isOk()) return table.status();
  IntraKernelBuffers::global().tables().add(std::move(table.value()));
  return {};
}

void setInstrumentationLimits(uint64_t ringBytes, uint64_t maxTraceEvents, uint32_t traceCapacity) {
  IntraKernelBuffers::global().setLimits(ringBytes, maxTraceEvents, traceCapacity);
}

}  // namespace
}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti

namespace proton::cupti {

template <>
const MajorBackend &majorBackend<PROTON_CUPTI_MAJOR>() {
  static const MajorBackend entry = {PROTON_CUPTI_MAJOR, &backend, &allocateInstrumentationBuffer,
                                     &registerInstrumentationTable, &setInstrumentationLimits};
  return entry;
}

}  // namespace proton::cupti
