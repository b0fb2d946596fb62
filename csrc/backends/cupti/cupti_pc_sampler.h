// PcSampler: CUPTI instruction (PC) sampling for every sampling session of the process.
// CUPTI samples per CUDA context and allows one configuration per context, so one sampler
// serves all sessions; PcSampleAttributor hands each session its kernels' samples.
//
//   PcSampler sampler(attributor, processMu);
//   sampler.start(api, /*periodLog2=*/10, contexts);  // first sampling session
//   sampler.addContext(ctx);                          // a context first seen at a launch
//   sampler.collect();                                // flush: every sample so far filed
//   sampler.stop();                                   // last sampling session released
//
// Per context: cuptiPCSamplingEnable, then its stall reasons, then the configuration:
// continuous collection (kernels keep running concurrently), period 2^k cycles, every stall
// reason, a 16 MB scratch buffer and a parsed-data buffer CUPTI fills when a range ends.
// A reader thread calls cuptiPCSamplingGetData every 50 ms, which hands samples over when
// CUPTI's scratch buffer spills; the rest comes when a range ends, so collect() disables and
// re-enables sampling (seen on an H100 with CUDA 13: every sample of a short run arrives
// there). What that costs is CUPTI's: decoding the samples at disable (about 8 million a
// second seen, so seconds at 2^10 cycles after a busy run) and preparing each kernel at its
// first launch while sampling (about 0.3 s seen for a Triton kernel); the launches between
// run at full speed. Contexts that refuse (no permission to read counters, unsupported GPU)
// are reported once on stderr and counted; kernel timing goes on regardless.
//
// Buffers per context (CUpti_PCSamplingData, PARSED format):
//   data { collectNumPcs, totalNumPcs, remainingNumPcs, pPcData } -> pcs[collectNumPcs]
//   pcs[i].stallReason -> stalls[i * numStallReasons .. +numStallReasons]
//
// Thread-safe: mu_ guards the contexts and every CUPTI PC sampling call; samples are filed
// under the backend's processMu (lock order: mu_, then processMu).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cupti/cupti_line_table.h"
#include "backends/cupti/cupti_loader.h"
#include "backends/pc_sample_attributor.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

class PcSampler {
 public:
  PcSampler(PcSampleAttributor &samples, std::mutex &processMu);
  ~PcSampler();

  // Starts sampling every 2^periodLog2 cycles on `contexts`. Fails (changing nothing) only
  // when this CUPTI lacks the PC sampling API; a context that refuses is reported, counted
  // and skipped.
  Status start(const CuptiApi &api, uint32_t periodLog2, const std::vector<CUcontext> &contexts);
  void stop();
  bool running() const { return running_.load(std::memory_order_acquire); }
  uint32_t periodLog2() const { return periodLog2_; }

  // Vendor callbacks (noexcept): a context seen for the first time, one about to be
  // destroyed, a module loaded.
  void addContext(CUcontext context) noexcept;
  void removeContext(CUcontext context) noexcept;
  void onModuleLoaded(CUcontext context, const void *cubin, size_t size) noexcept;

  // Files every sample taken so far (the caller synchronised the contexts first).
  void collect();

 private:
  struct Buffer;
  struct Context;

  bool enableLocked(Context &c);
  bool configureLocked(Context &c);
  void disableLocked(Context &c);
  void readLocked(Context &c);
  void fileBuffer(Context &c, const CUpti_PCSamplingData &data);
  void closeWindow(bool final);
  void readerLoop();
  void report(CUptiResult rc, const char *call);

  PcSampleAttributor &samples_;
  std::mutex &processMu_;
  const CuptiApi *api_ = nullptr;
  std::unique_ptr<CubinLineTable> lines_;
  uint32_t periodLog2_ = 0;
  std::atomic<bool> running_{false};
  bool debug_ = false;

  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<PcSample> batch_;  // reused per buffer read
  std::vector<StallCount> stalls_;

  std::thread reader_;
  std::mutex readerMu_;
  std::condition_variable wake_;
  bool stopReader_ = false;
};

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
