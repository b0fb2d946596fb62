// TreeBuilder: the part of the readers shared by both encodings: appends nodes in
// pre-order and sets their names and metrics into a TreeColumns. Internal to csrc/viewer.
#pragma once

#include <string>

#include "core/status.h"
#include "viewer/tree_columns.h"

namespace proton::viewer {

class TreeBuilder {
 public:
  explicit TreeBuilder(TreeColumns *out) : out_(out), strings_(&out->strings) {
    *out = TreeColumns{};
  }

  int32_t beginNode(int32_t parent) {
    out_->parents.push_back(parent);
    out_->nameIds.push_back(kNoName);
    lastColumn_ = -1;
    return static_cast<int32_t>(out_->parents.size() - 1);
  }
  void setName(int32_t node, std::string_view name) { out_->nameIds[node] = intern(name); }
  bool hasName(int32_t node) const { return out_->nameIds[node] != kNoName; }
  uint32_t intern(std::string_view s) { return strings_.intern(s); }

  // False when the node already has this metric or lists its metrics in another order
  // than the one first seen (a dict rebuilt from the columns would differ).
  bool setMetric(int32_t node, std::string_view key, ValueKind kind, uint64_t bits) {
    int column = findColumn(key);
    if (column < lastColumn_) return false;
    MetricColumn &m = out_->metrics[column];
    if (m.kinds.size() <= static_cast<size_t>(node)) {
      m.kinds.resize(node + 1, ValueKind::kAbsent);
      m.values.resize(node + 1, 0);
    } else if (m.kinds[node] != ValueKind::kAbsent) {
      return false;
    }
    m.kinds[node] = kind;
    m.values[node] = bits;
    m.lastKind = kind;
    lastColumn_ = column;
    return true;
  }

  void finish() {
    for (MetricColumn &m : out_->metrics) {
      m.kinds.resize(out_->size(), ValueKind::kAbsent);
      m.values.resize(out_->size(), 0);
    }
  }

 private:
  static constexpr uint32_t kNoName = 0xFFFFFFFFu;

  int findColumn(std::string_view key) {
    auto &metrics = out_->metrics;
    int n = static_cast<int>(metrics.size());
    // Nodes mostly repeat the previous node's keys in order: try the next column first.
    int guess = lastColumn_ + 1;
    if (guess < n && metrics[guess].name == key) return guess;
    for (int k = 0; k < n; ++k) {
      if (metrics[k].name == key) return k;
    }
    metrics.push_back(MetricColumn{std::string(key), {}, {}, ValueKind::kAbsent});
    return n;
  }

  TreeColumns *out_;
  StringInterner strings_;
  int lastColumn_ = -1;
};

}  // namespace proton::viewer
