#include "backends/cupti/cupti_pc_translate.h"

#include <cstring>
#include <string_view>

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

uint32_t periodLog2ForCycles(uint64_t cycles) {
  if (cycles <= (uint64_t(1) << kMinPeriodLog2)) return kMinPeriodLog2;
  if (cycles >= (uint64_t(1) << kMaxPeriodLog2)) return kMaxPeriodLog2;
  uint32_t below = 63 - static_cast<uint32_t>(__builtin_clzll(cycles));  // 2^below <= cycles
  uint64_t low = uint64_t(1) << below, high = low << 1;
  return cycles - low < high - cycles ? below : below + 1;
}

Result<uint32_t> samplingPeriodLog2(const ModeSpec &mode) {
  uint64_t cycles = kDefaultIntervalCycles;
  for (const auto &[key, value] : mode.options) {
    if (key != "interval") {
      return Status{StatusCode::kInvalidArgument, "[PROTON] mode='" + mode.toString() +
                                                      "': unknown option '" + key +
                                                      "'. Allowed options: interval"};
    }
    char *end = nullptr;
    unsigned long long v =
        value.empty() || value[0] == '-' ? 0 : std::strtoull(value.c_str(), &end, 10);
    if (v == 0 || !end || *end != '\0') {
      return Status{StatusCode::kInvalidArgument,
                    "[PROTON] mode='" + mode.toString() +
                        "': interval must be a positive number of GPU cycles, got '" + value + "'"};
    }
    cycles = v;
  }
  return periodLog2ForCycles(cycles);
}

void translatePcData(const CUpti_PCSamplingData &data, std::vector<PcSample> &samples,
                     std::vector<StallCount> &stalls) {
  samples.clear();
  stalls.clear();
  size_t n = data.pPcData ? data.totalNumPcs : 0;
  size_t reasons = 0;
  for (size_t i = 0; i < n; ++i)
    if (data.pPcData[i].stallReason) reasons += data.pPcData[i].stallReasonCount;
  stalls.reserve(reasons);
  samples.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const CUpti_PCSamplingPCData &pc = data.pPcData[i];
    PcSample s;
    s.module = pc.cubinCrc;
    s.function = pc.functionName;
    s.pcOffset = pc.pcOffset;
    s.numStalls = pc.stallReason ? static_cast<uint32_t>(pc.stallReasonCount) : 0;
    for (uint32_t k = 0; k < s.numStalls; ++k)
      stalls.push_back(
          StallCount{pc.stallReason[k].pcSamplingStallReasonIndex, pc.stallReason[k].samples});
    samples.push_back(s);
  }
  // stalls no longer grows: point each sample at its run.
  size_t at = 0;
  for (PcSample &s : samples) {
    s.stalls = stalls.data() + at;
    at += s.numStalls;
  }
}

std::vector<std::pair<uint32_t, std::string>> stallReasonList(const uint32_t *indexes,
                                                              char *const *names, size_t n) {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (size_t i = 0; i < n; ++i)
    out.emplace_back(indexes[i],
                     std::string(names[i], strnlen(names[i], CUPTI_STALL_REASON_STRING_SIZE)));
  return out;
}

bool isPermissionError(CUptiResult rc) {
  return rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
         rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
}

std::string samplingUnavailableMessage(CUptiResult rc, const std::string &call,
                                       const std::string &cuptiText) {
  std::string why;
  if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    why =
        "this user may not read the GPU's performance counters. The NVIDIA driver allows that "
        "to administrators only: run the program as root (in a container: with "
        "--cap-add=SYS_ADMIN), or let every user profile by loading the driver with "
        "NVreg_RestrictProfilingToAdminUsers=0 (add 'options nvidia "
        "NVreg_RestrictProfilingToAdminUsers=0' to a file in /etc/modprobe.d/ and reboot; see "
        "https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
  } else if (rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) {
    why =
        "the hypervisor does not allow profiling on this virtual GPU (ask its administrator "
        "to enable profiling for the vGPU)";
  } else if (rc == CUPTI_ERROR_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED ||
             rc == CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED) {
    why =
        "this GPU or system cannot sample instructions (it needs compute capability 7.0 or "
        "newer, and no MIG partition, confidential computing or unprofiled vGPU)";
  } else {
    why = "CUPTI could not start instruction sampling";
  }
  return "[PROTON] mode='pcsampling': " + why + ". " + call + " failed: " + cuptiText +
         ". Continuing with kernel timing only.";
}

namespace {

template <typename T>
bool readAt(const unsigned char *p, size_t size, uint64_t offset, T &out) {
  if (offset > size || size - offset < sizeof(T)) return false;
  std::memcpy(&out, p + offset, sizeof(T));
  return true;
}

}  // namespace

CubinLines cubinLineInfo(const void *data, size_t size) {
  // ELF64 little endian: e_shoff at 40, e_shentsize/e_shnum/e_shstrndx at 58/60/62; a section
  // header has sh_name at 0, sh_offset at 24, sh_size at 32.
  const auto *p = static_cast<const unsigned char *>(data);
  if (!p || size < 64 ||
      std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      p[4] != 2 || p[5] != 1)
    return CubinLines::kUnknown;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!readAt(p, size, 40, shoff) || !readAt(p, size, 58, shentsize) ||
      !readAt(p, size, 60, shnum) || !readAt(p, size, 62, shstrndx) || shentsize < 40 ||
      shstrndx >= shnum)
    return CubinLines::kUnknown;
  auto header = [&](uint16_t i, uint32_t &name, uint64_t &offset, uint64_t &length) {
    uint64_t at = shoff + uint64_t(i) * shentsize;
    return readAt(p, size, at, name) && readAt(p, size, at + 24, offset) &&
           readAt(p, size, at + 32, length);
  };
  uint32_t unused = 0;
  uint64_t strOffset = 0, strSize = 0;
  if (!header(shstrndx, unused, strOffset, strSize) || strOffset > size ||
      size - strOffset < strSize)
    return CubinLines::kUnknown;
  std::string_view names(reinterpret_cast<const char *>(p + strOffset), strSize);
  for (uint16_t i = 0; i < shnum; ++i) {
    uint32_t name = 0;
    uint64_t offset = 0, length = 0;
    if (!header(i, name, offset, length)) return CubinLines::kUnknown;
    if (name >= names.size()) continue;
    std::string_view section = names.substr(name);
    section = section.substr(0, section.find('\0'));
    if (section.starts_with(".debug_line") || section.starts_with(".nv_debug_line"))
      return CubinLines::kPresent;
  }
  return CubinLines::kNone;
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
