#include "backends/capture_registry.h"

#include "core/stats.h"

namespace proton {

void CaptureRegistry::put(uint64_t node, std::shared_ptr<const CaptureStack> stack) {
  static Counter &untracked = Stats::global().counter("graph_nodes_not_tracked");
  if (nodes_.size() >= kMaxNodes && !nodes_.count(node)) {
    untracked.add();
    return;
  }
  nodes_[node] = std::move(stack);
}

void CaptureRegistry::add(uint64_t node, CaptureStack stack) {
  std::lock_guard lock(mu_);
  put(node, std::make_shared<const CaptureStack>(std::move(stack)));
}

void CaptureRegistry::alias(uint64_t clone, uint64_t original) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(original);
  if (it != nodes_.end()) put(clone, it->second);
}

void CaptureRegistry::remove(uint64_t node) {
  std::lock_guard lock(mu_);
  nodes_.erase(node);
}

std::shared_ptr<const CaptureStack> CaptureRegistry::find(uint64_t node) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second;
}

size_t CaptureRegistry::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

void CaptureRegistry::clear() {
  std::lock_guard lock(mu_);
  nodes_.clear();
}

}  // namespace proton
