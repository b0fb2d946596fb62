// Which GPU runtime this process could profile, found without initialising any vendor API
// in the core: the probe only dlopen()s the driver library and asks for the device count.
//
//   RuntimeProbe p = probeCudaRuntime();
//   if (!p.available) warn(p.reason);
//
// Thread-safe; the result is computed once per process.
#pragma once

#include <string>

namespace proton {

struct RuntimeProbe {
  bool available = false;
  int deviceCount = 0;
  std::string reason;  // why not available, for the user
};

const RuntimeProbe &probeCudaRuntime();
// Called by CUDA's injection entry point (api/injection.cc), which the driver runs from inside
// cuInit: a probe from then on must not call cuInit again. It reports the runtime available
// with deviceCount -1 (the driver is initialising, so it found a device to initialise).
void noteCudaInitialising();

}  // namespace proton
