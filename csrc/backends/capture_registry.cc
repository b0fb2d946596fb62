#include "backends/capture_registry.h"

#include "core/stats.h"

namespace proton {

void CaptureRegistry::put(uint64_t node, std::shared_ptr<const CaptureContext> context) {
  static Counter &untracked = Stats::global().counter("graph_nodes_not_tracked");
  if (nodes_.size() >= kMaxNodes && !nodes_.count(node)) {
    untracked.add();
    return;
  }
  nodes_[node] = Entry{std::move(context), 0};
}

void CaptureRegistry::add(uint64_t node, CaptureContext context) {
  std::lock_guard lock(mu_);
  put(node, std::make_shared<const CaptureContext>(std::move(context)));
}

void CaptureRegistry::alias(uint64_t clone, uint64_t original) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(original);
  if (it != nodes_.end()) put(clone, it->second.context);
}

void CaptureRegistry::remove(uint64_t node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.retiredAt != 0) return;
  it->second.retiredAt = ++lastRetired_;
  retired_.emplace_back(node, lastRetired_);
  if (retired_.size() > kMaxRetired) forgetOldest();
}

void CaptureRegistry::forgetOldest() {
  auto [node, retiredAt] = retired_.front();
  retired_.pop_front();
  auto it = nodes_.find(node);
  // A node id seen again after its retirement (not expected: CUPTI ids are unique) stays.
  if (it != nodes_.end() && it->second.retiredAt == retiredAt) nodes_.erase(it);
}

std::shared_ptr<const CaptureContext> CaptureRegistry::find(uint64_t node) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second.context;
}

uint64_t CaptureRegistry::retiredMark() const {
  std::lock_guard lock(mu_);
  return lastRetired_;
}

void CaptureRegistry::forgetRetired(uint64_t mark) {
  std::lock_guard lock(mu_);
  while (!retired_.empty() && retired_.front().second <= mark) forgetOldest();
}

size_t CaptureRegistry::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

size_t CaptureRegistry::retired() const {
  std::lock_guard lock(mu_);
  return retired_.size();
}

void CaptureRegistry::clear() {
  std::lock_guard lock(mu_);
  nodes_.clear();
  retired_.clear();
}

}  // namespace proton
