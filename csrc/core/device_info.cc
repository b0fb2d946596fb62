#include "core/device_info.h"

namespace proton {

DeviceTable &DeviceTable::global() {
  static DeviceTable *table = new DeviceTable();
  return *table;
}

void DeviceTable::set(const DeviceInfo &info) {
  std::lock_guard lock(mu_);
  devices_[{info.type, info.index}] = info;
}

std::optional<DeviceInfo> DeviceTable::get(DeviceType type, int32_t index) const {
  std::lock_guard lock(mu_);
  auto it = devices_.find({type, index});
  if (it == devices_.end()) return std::nullopt;
  return it->second;
}

}  // namespace proton
