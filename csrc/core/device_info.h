// DeviceTable: what the profile's devices block says about each GPU that ran something.
//
//   DeviceTable::global().set({DeviceType::kCuda, 0, "90", 132, 1980000, 2619000, 5120});
//
// Filled by a backend when it first sees a device; read by writers. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/fork_lock.h"
#include "core/metric.h"

namespace proton {

struct DeviceInfo {
  DeviceType type = DeviceType::kNone;
  int32_t index = 0;
  std::string arch;  // "90" for sm_90
  uint32_t numSms = 0;
  uint64_t clockRateKhz = 0;
  uint64_t memoryClockRateKhz = 0;
  uint32_t busWidthBits = 0;
  // Which physical GPU, where the backend can tell: "0000:1b:00.0" (PCI domain:bus:device).
  // Device indices depend on CUDA_VISIBLE_DEVICES, so ranks sharing a host need this.
  std::string pciBusId;
};

class DeviceTable {
 public:
  static DeviceTable &global();
  // Around fork() (runtime/fork_safety.cc; core/fork_lock.h says how the lock is released).
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork(bool inChild) { releaseAfterFork(mu_, inChild); }

  void set(const DeviceInfo &info);
  std::optional<DeviceInfo> get(DeviceType type, int32_t index) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<DeviceType, int32_t>, DeviceInfo> devices_;
};

}  // namespace proton
