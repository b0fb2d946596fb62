#include "backends/gpu_backend.h"

#include <mutex>

namespace proton {
namespace {

std::mutex &dirsMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string> &dirs() {
  static std::vector<std::string> value;
  return value;
}

}  // namespace

void setLibrarySearchDirs(std::vector<std::string> value) {
  std::lock_guard lock(dirsMutex());
  dirs() = std::move(value);
}

std::vector<std::string> librarySearchDirs() {
  std::lock_guard lock(dirsMutex());
  return dirs();
}

#ifndef PROTON_HAS_CUPTI
GpuBackend *cuptiBackend() { return nullptr; }

namespace {
Status noInstrumentation() {
  return {StatusCode::kUnavailable,
          "[PROTON] backend='instrumentation' needs the CUPTI backend, which this build lacks"};
}
}  // namespace

Status allocateInstrumentationBuffer(size_t, bool, uint64_t, uint64_t *devicePtr) {
  *devicePtr = 0;
  return noInstrumentation();
}
Status registerInstrumentationTable(std::string_view) { return noInstrumentation(); }
void setInstrumentationLimits(uint64_t, uint64_t, uint32_t) {}
#endif

}  // namespace proton
