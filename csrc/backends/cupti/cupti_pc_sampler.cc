#include "backends/cupti/cupti_pc_sampler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "backends/cupti/cupti_pc_translate.h"
#include "core/clock.h"
#include "core/stats.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

constexpr size_t kScratchBytes = size_t(16) << 20;
constexpr size_t kReadPcs = 8192;    // PCs per cuptiPCSamplingGetData
constexpr size_t kRangePcs = 16384;  // PCs CUPTI can leave in the buffer at a range's end
constexpr int kMaxReadsPerContext = 256;
constexpr auto kReadPeriod = std::chrono::milliseconds(50);

Counter &stat(const char *name) { return Stats::global().counter(name); }

}  // namespace

struct PcSampler::Buffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> stalls;

  void allocate(size_t numPcs, size_t numReasons) {
    pcs.assign(numPcs, CUpti_PCSamplingPCData{});
    stalls.assign(numPcs * numReasons, CUpti_PCSamplingStallReason{});
    for (size_t i = 0; i < numPcs; ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = stalls.data() + i * numReasons;
    }
    data = CUpti_PCSamplingData{};
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = numPcs;
    data.pPcData = pcs.data();
  }
  // What CUPTI reports in the buffer, cleared before it writes again.
  void clearCounts() {
    data.totalNumPcs = data.remainingNumPcs = 0;
    data.totalSamples = data.droppedSamples = data.nonUsrKernelsTotalSamples = 0;
    data.hardwareBufferFull = 0;
  }
};

struct PcSampler::Context {
  CUcontext context = nullptr;
  bool enabled = false;
  std::vector<uint32_t> reasonIndexes;
  StallReasonMap reasons;
  Buffer range;  // CUPTI's: filled when a range ends (module reload, disable)
  Buffer read;   // ours: cuptiPCSamplingGetData
};

PcSampler::PcSampler(PcSampleAttributor &samples, std::mutex &processMu)
    : samples_(samples), processMu_(processMu) {
  for (const char *name : {"pc_sampling_permission_denied", "pc_sampling_contexts_unavailable",
                           "pc_sampling_read_errors", "pc_sampling_hardware_buffer_full",
                           "pc_samples_dropped_by_hardware", "pc_samples_in_non_user_kernels"})
    stat(name);
}

PcSampler::~PcSampler() { stop(); }

Status PcSampler::start(const CuptiApi &api, uint32_t periodLog2,
                        const std::vector<CUcontext> &contexts) {
  if (running()) return {};
  // Kernel times must be on Proton's clock, the one sample reads are timed with.
  std::string missing = api.pcSamplingMissing;
  if (!api.registerTimestampCallback)
    missing += std::string(missing.empty() ? "" : ", ") + "cuptiActivityRegisterTimestampCallback";
  if (!missing.empty()) {
    return {StatusCode::kUnavailable,
            "[PROTON] mode='pcsampling': the CUPTI library " + api.path +
                " lacks the PC sampling API (" + missing +
                "). Install a CUDA 12 or newer CUPTI, or set PROTON_CUPTI_LIB_PATH to one."};
  }
  const char *debug = std::getenv("PROTON_PCSAMPLING_DEBUG");
  debug_ = debug && std::strcmp(debug, "1") == 0;
  {
    std::lock_guard lock(mu_);
    api_ = &api;
    if (!lines_) lines_ = std::make_unique<CubinLineTable>(api);
    periodLog2_ = periodLog2;
    running_.store(true, std::memory_order_release);
  }
  for (CUcontext c : contexts) addContext(c);
  {
    std::lock_guard lock(readerMu_);
    stopReader_ = false;
  }
  reader_ = std::thread([this] { readerLoop(); });
  return {};
}

void PcSampler::stop() {
  if (!running()) return;
  {
    std::lock_guard lock(readerMu_);
    stopReader_ = true;
  }
  wake_.notify_all();
  if (reader_.joinable()) reader_.join();
  std::lock_guard lock(mu_);
  running_.store(false, std::memory_order_release);
  for (auto &c : contexts_) {
    readLocked(*c);
    disableLocked(*c);
  }
  contexts_.clear();
  closeWindow(/*final=*/true);
}

void PcSampler::report(CUptiResult rc, const char *call) {
  static std::mutex reportedMu;
  static std::set<int> reported;
  stat(isPermissionError(rc) ? "pc_sampling_permission_denied" : "pc_sampling_contexts_unavailable")
      .add();
  std::lock_guard lock(reportedMu);
  if (!reported.insert(static_cast<int>(rc)).second) return;
  std::fprintf(stderr, "%s\n", samplingUnavailableMessage(rc, call, api_->errorString(rc)).c_str());
}

bool PcSampler::enableLocked(Context &c) {
  CUpti_PCSamplingEnableParams enable{};
  enable.size = CUpti_PCSamplingEnableParamsSize;
  enable.ctx = c.context;
  if (CUptiResult rc = api_->pcSamplingEnable(&enable); rc != CUPTI_SUCCESS) {
    report(rc, "cuptiPCSamplingEnable");
    return false;
  }
  c.enabled = true;
  if (c.reasonIndexes.empty()) {
    // The stall reasons (CUPTI answers only once sampling is enabled on the context).
    size_t count = 0;
    CUpti_PCSamplingGetNumStallReasonsParams num{};
    num.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    num.ctx = c.context;
    num.numStallReasons = &count;
    CUptiResult rc = api_->pcSamplingGetNumStallReasons(&num);
    std::vector<std::vector<char>> storage(count,
                                           std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
    std::vector<char *> names(count);
    for (size_t i = 0; i < count; ++i) names[i] = storage[i].data();
    std::vector<uint32_t> indexes(count);
    CUpti_PCSamplingGetStallReasonsParams get{};
    get.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    get.ctx = c.context;
    get.numStallReasons = count;
    get.stallReasonIndex = indexes.data();
    get.stallReasons = names.data();
    if (rc == CUPTI_SUCCESS && count > 0) rc = api_->pcSamplingGetStallReasons(&get);
    if (rc != CUPTI_SUCCESS || count == 0) {
      report(rc != CUPTI_SUCCESS ? rc : CUPTI_ERROR_NOT_SUPPORTED,
             "cuptiPCSamplingGetStallReasons");
      disableLocked(c);
      return false;
    }
    auto list = stallReasonList(indexes.data(), names.data(), count);
    {
      std::lock_guard lock(processMu_);
      c.reasons = samples_.stallReasons(list);
    }
    c.reasonIndexes = std::move(indexes);
    c.range.allocate(kRangePcs, count);
    c.read.allocate(kReadPcs, count);
    if (debug_) {
      std::fprintf(stderr, "[PROTON] pcsampling: context %p, period 2^%u cycles, %zu reasons:",
                   static_cast<void *>(c.context), periodLog2_, count);
      for (const auto &[index, name] : list) std::fprintf(stderr, " %u=%s", index, name.c_str());
      std::fprintf(stderr, "\n");
    }
  }
  if (!configureLocked(c)) {
    disableLocked(c);
    return false;
  }
  return true;
}

bool PcSampler::configureLocked(Context &c) {
  c.range.clearCounts();
  CUpti_PCSamplingConfigurationInfo info[5] = {};
  info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  info[0].attributeData.collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  info[1].attributeData.samplingPeriodData.samplingPeriod = periodLog2_;
  info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  info[2].attributeData.stallReasonData.stallReasonCount = c.reasonIndexes.size();
  info[2].attributeData.stallReasonData.pStallReasonIndex = c.reasonIndexes.data();
  info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
  info[3].attributeData.scratchBufferSizeData.scratchBufferSize = kScratchBytes;
  info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  info[4].attributeData.samplingDataBufferData.samplingDataBuffer = &c.range.data;
  CUpti_PCSamplingConfigurationInfoParams params{};
  params.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  params.ctx = c.context;
  params.numAttributes = std::size(info);
  params.pPCSamplingConfigurationInfo = info;
  CUptiResult rc = api_->pcSamplingSetConfiguration(&params);
  for (size_t i = 0; rc == CUPTI_SUCCESS && i < std::size(info); ++i)
    if (info[i].attributeStatus != CUPTI_SUCCESS) rc = info[i].attributeStatus;
  if (rc != CUPTI_SUCCESS) report(rc, "cuptiPCSamplingSetConfigurationAttribute");
  return rc == CUPTI_SUCCESS;
}

void PcSampler::disableLocked(Context &c) {
  if (!c.enabled) return;
  CUpti_PCSamplingDisableParams params{};
  params.size = CUpti_PCSamplingDisableParamsSize;
  params.ctx = c.context;
  api_->pcSamplingDisable(&params);
  c.enabled = false;
  // Disabling hands over, in the range buffer, what CUPTI still held.
  if (debug_)
    std::fprintf(stderr,
                 "[PROTON] pcsampling: disabled, range buffer %zu PCs, samples %llu, "
                 "dropped %llu, non-user %llu\n",
                 c.range.data.totalNumPcs, (unsigned long long)c.range.data.totalSamples,
                 (unsigned long long)c.range.data.droppedSamples,
                 (unsigned long long)c.range.data.nonUsrKernelsTotalSamples);
  fileBuffer(c, c.range.data);
  c.range.clearCounts();
}

void PcSampler::readLocked(Context &c) {
  if (!c.enabled) return;
  for (int i = 0; i < kMaxReadsPerContext; ++i) {
    CUpti_PCSamplingGetDataParams params{};
    params.size = CUpti_PCSamplingGetDataParamsSize;
    params.ctx = c.context;
    params.pcSamplingData = &c.read.data;
    c.read.clearCounts();
    CUptiResult rc = api_->pcSamplingGetData(&params);
    if (rc == CUPTI_ERROR_OUT_OF_MEMORY || c.read.data.hardwareBufferFull) {
      stat("pc_sampling_hardware_buffer_full").add();
      static std::once_flag warned;
      std::call_once(warned, [] {
        std::fprintf(stderr,
                     "[PROTON] mode='pcsampling': the GPU's sample buffer overflowed and "
                     "samples were lost (pc_sampling_hardware_buffer_full); a larger "
                     "interval samples less often.\n");
      });
    } else if (rc != CUPTI_SUCCESS) {
      stat("pc_sampling_read_errors").add();
      return;
    }
    if (debug_) {
      std::fprintf(stderr,
                   "[PROTON] pcsampling: read %zu PCs (%zu remain), samples %llu, dropped %llu, "
                   "non-user %llu, range buffer %zu PCs\n",
                   c.read.data.totalNumPcs, c.read.data.remainingNumPcs,
                   (unsigned long long)c.read.data.totalSamples,
                   (unsigned long long)c.read.data.droppedSamples,
                   (unsigned long long)c.read.data.nonUsrKernelsTotalSamples,
                   c.range.data.totalNumPcs);
    }
    fileBuffer(c, c.read.data);
    bool more = c.read.data.remainingNumPcs > 0 || c.range.data.totalNumPcs > 0;
    if (c.read.data.totalNumPcs == 0 || !more) return;
  }
}

void PcSampler::fileBuffer(Context &c, const CUpti_PCSamplingData &data) {
  stat("pc_samples_dropped_by_hardware").add(data.droppedSamples);
  stat("pc_samples_in_non_user_kernels").add(data.nonUsrKernelsTotalSamples);
  if (data.totalNumPcs == 0) return;
  translatePcData(data, batch_, stalls_);
  lines_->warm(batch_.data(), batch_.size());  // the slow part, outside processMu
  std::lock_guard lock(processMu_);
  samples_.add(batch_.data(), batch_.size(), c.reasons, *lines_);
}

void PcSampler::closeWindow(bool final) {
  std::lock_guard lock(processMu_);
  samples_.closeWindow(monotonicNs(), final);
}

void PcSampler::readerLoop() {
  for (;;) {
    {
      std::unique_lock lock(readerMu_);
      if (wake_.wait_for(lock, kReadPeriod, [this] { return stopReader_; })) return;
    }
    std::lock_guard lock(mu_);
    for (auto &c : contexts_) readLocked(*c);
    closeWindow(/*final=*/false);
  }
}

void PcSampler::collect() {
  if (!running()) return;
  std::lock_guard lock(mu_);
  for (auto &c : contexts_) {
    readLocked(*c);
    // CUPTI hands most samples over only when the range ends, here at disable; sampling then
    // resumes with the same configuration.
    disableLocked(*c);
    enableLocked(*c);
  }
  closeWindow(/*final=*/true);
}

void PcSampler::addContext(CUcontext context) noexcept {
  if (!context || !running()) return;
  try {
    std::lock_guard lock(mu_);
    if (!running()) return;  // stopped meanwhile
    for (auto &c : contexts_)
      if (c->context == context) return;
    auto c = std::make_unique<Context>();
    c->context = context;
    enableLocked(*c);
    contexts_.push_back(std::move(c));  // kept when refused: asked once per context
  } catch (...) {
    stat("pc_sampling_read_errors").add();
  }
}

void PcSampler::removeContext(CUcontext context) noexcept {
  if (!running()) return;
  try {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < contexts_.size(); ++i) {
      if (contexts_[i]->context != context) continue;
      readLocked(*contexts_[i]);
      disableLocked(*contexts_[i]);
      contexts_.erase(contexts_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  } catch (...) {
    stat("pc_sampling_read_errors").add();
  }
}

void PcSampler::onModuleLoaded(CUcontext context, const void *cubin, size_t size) noexcept {
  if (!running()) return;
  try {
    lines_->addCubin(cubin, size);
    // A module loaded after one was unloaded ends a range: CUPTI moved its samples into the
    // context's range buffer, which must be read before the next range can use it.
    std::lock_guard lock(mu_);
    for (auto &c : contexts_)
      if (c->context == context && c->range.data.totalNumPcs > 0) readLocked(*c);
  } catch (...) {
    stat("pc_sampling_read_errors").add();
  }
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
