#include "core/stats.h"

namespace proton {

Stats &Stats::global() {
  static Stats *stats = new Stats();  // never destroyed: counted into at exit
  return *stats;
}

Counter &Stats::counter(const std::string &name) {
  std::lock_guard lock(mu_);
  for (auto &[n, c] : counters_)
    if (n == name) return c;
  counters_.emplace_back(std::piecewise_construct, std::forward_as_tuple(name),
                         std::forward_as_tuple());
  return counters_.back().second;
}

Stats::Snapshot Stats::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(counters_.size());
  for (const auto &[n, c] : counters_) out.emplace_back(n, c.value());
  return out;
}

Stats::Snapshot Stats::since(const Snapshot &start) const {
  Snapshot out = snapshot();
  // Both are in registration order, and counters are never unregistered: `start` is a prefix.
  for (size_t i = 0; i < out.size() && i < start.size(); ++i)
    if (out[i].first == start[i].first)
      out[i].second -= out[i].second >= start[i].second ? start[i].second : 0;  // reset: as is
  return out;
}

void Stats::resetAll() {
  std::lock_guard lock(mu_);
  for (auto &[n, c] : counters_) c.reset();
}

}  // namespace proton
