// CUPTI PC sampling, the parts that need no GPU: the sampling period from the session's
// mode, the translation of CUPTI's parsed sample buffers into vendor-neutral PcSamples, the
// messages for a GPU that refuses to sample, and a look into a cubin for line information.
//
//   Result<uint32_t> k = samplingPeriodLog2(session.options().mode);   // 2^k cycles
//   translatePcData(buffer, samples, stalls);   // samples point into stalls
//   attributor.add(samples.data(), samples.size(), reasons, lines);
//
// Layout read by translatePcData (cupti_pcsampling.h, PARSED output format):
//   CUpti_PCSamplingData { ..., totalNumPcs, remainingNumPcs, pPcData -> [totalNumPcs] }
//   CUpti_PCSamplingPCData { cubinCrc, pcOffset, functionName, stallReasonCount,
//                            stallReason -> [stallReasonCount] {index, samples} }
//
// Pure functions; thread-safe.
#pragma once

#include <cupti.h>
#include <cupti_pcsampling.h>

#include <string>
#include <vector>

#include "backends/pc_sample_attributor.h"
#include "core/options.h"
#include "core/status.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

// CUPTI samples every 2^k cycles, k in [5, 31].
inline constexpr uint32_t kMinPeriodLog2 = 5;
inline constexpr uint32_t kMaxPeriodLog2 = 31;
// proton.mode.PCSampling()'s default interval, also used for the plain string "pcsampling".
inline constexpr uint64_t kDefaultIntervalCycles = 1000;

// The allowed period nearest to `cycles` (ties go to the longer period): 1000 -> 10 (1024).
uint32_t periodLog2ForCycles(uint64_t cycles);
// From mode "pcsampling[:interval=N]"; kInvalidArgument for a bad value or unknown option.
Result<uint32_t> samplingPeriodLog2(const ModeSpec &mode);

// Appends one PcSample per PC of a parsed buffer; each sample's stalls point into `stalls`,
// which must not change until the samples are used. Both vectors are cleared first.
void translatePcData(const CUpti_PCSamplingData &data, std::vector<PcSample> &samples,
                     std::vector<StallCount> &stalls);

// The stall reason names CUPTI gives, by index, as the attributor takes them.
std::vector<std::pair<uint32_t, std::string>> stallReasonList(const uint32_t *indexes,
                                                              char *const *names, size_t n);

// What to tell the user when `call` (e.g. "cuptiPCSamplingEnable") failed with rc on a
// context; `cuptiText` is CUPTI's own description of rc. Always ends by saying that kernel
// timing goes on.
std::string samplingUnavailableMessage(CUptiResult rc, const std::string &call,
                                       const std::string &cuptiText);
// Whether rc means the user lacks the permission to read GPU performance counters.
bool isPermissionError(CUptiResult rc);

enum class CubinLines { kUnknown, kNone, kPresent };
// Whether an ELF cubin has DWARF line sections (.debug_line, .nv_debug_line_sass). kUnknown
// when the bytes are not a well-formed 64-bit ELF file.
CubinLines cubinLineInfo(const void *data, size_t size);

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
