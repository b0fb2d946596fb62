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
#endif

}  // namespace proton
