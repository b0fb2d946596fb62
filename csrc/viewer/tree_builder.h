// TreeBuilder: the part of the readers shared by both encodings: appends nodes in
// pre-order and sets their names and metrics into a TreeColumns (a node's metrics may come
// after its children, as in Triton's files). Internal to csrc/viewer.
//
//   TreeBuilder b(&tree, estimateNodes(data, "\"frame\""));   // reserves the columns
//   int32_t root = b.beginNode(-1);
//   b.setName(root, "ROOT");
//   b.beginMetrics();
//   b.setMetric(root, "time (ns)", ValueKind::kInt, 10);
//   b.finish();
//
// One owner thread.
#pragma once

#include <string>

#include "core/status.h"
#include "viewer/tree_columns.h"

namespace proton::viewer {

// The node count of a document extrapolated from its first megabyte, where `marker` (the
// encoded "frame" key) occurs once per node; 10% more, to grow the columns rarely.
inline size_t estimateNodes(std::string_view data, std::string_view marker) {
  std::string_view sample = data.substr(0, size_t{1} << 20);
  size_t count = 0;
  for (size_t at = sample.find(marker); at != std::string_view::npos;
       at = sample.find(marker, at + marker.size())) {
    ++count;
  }
  double perByte = sample.empty() ? 0 : static_cast<double>(count) / sample.size();
  return static_cast<size_t>(perByte * static_cast<double>(data.size()) * 1.1) + 64;
}

class TreeBuilder {
 public:
  // expectedNodes: what the columns reserve (they grow past it if need be). strictOrder: a
  // node must list its metrics in the order first seen (files); Python's rows need not.
  TreeBuilder(TreeColumns *out, size_t expectedNodes, bool strictOrder = true)
      : out_(out), strings_(&out->strings), reserve_(expectedNodes), strictOrder_(strictOrder) {
    *out = TreeColumns{};
    out->parents.reserve(reserve_);
    out->nameIds.reserve(reserve_);
  }

  int32_t beginNode(int32_t parent) {
    out_->parents.push_back(parent);
    out_->nameIds.push_back(kNoName);
    return static_cast<int32_t>(out_->parents.size() - 1);
  }
  // Before a node's metrics: they list their keys in column order.
  void beginMetrics() { lastColumn_ = -1; }
  void setName(int32_t node, std::string_view name) { out_->nameIds[node] = intern(name); }
  bool hasName(int32_t node) const { return out_->nameIds[node] != kNoName; }
  uint32_t intern(std::string_view s) { return strings_.intern(s); }
  // A string metric value: the few distinct ones ("0", "CUDA") repeat on every kernel, so
  // the last one of each length (mod 4) is tried before the table.
  uint32_t internValue(std::string_view s) {
    uint32_t &cached = lastValues_[s.size() & 3];
    if (cached != kNoName && out_->strings[cached] == s) return cached;
    return cached = intern(s);
  }

  // False when the node already has this metric or (strictOrder) lists its metrics in
  // another order than the one first seen (a dict rebuilt from the columns would differ).
  bool setMetric(int32_t node, std::string_view key, ValueKind kind, uint64_t bits) {
    int column = findColumn(key);
    if (strictOrder_ && column < lastColumn_) return false;
    MetricColumn &m = out_->metrics[column];
    if (m.kinds.size() <= static_cast<size_t>(node)) {
      m.kinds.resize(node + 1, ValueKind::kAbsent);
      m.values.resize(node + 1, 0);
    } else if (m.kinds[node] != ValueKind::kAbsent) {
      return false;
    }
    m.kinds[node] = kind;
    m.values[node] = bits;
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
    metrics.push_back(MetricColumn{std::string(key), {}, {}});
    metrics.back().kinds.reserve(reserve_);
    metrics.back().values.reserve(reserve_);
    return n;
  }

  TreeColumns *out_;
  StringInterner strings_;
  size_t reserve_;
  bool strictOrder_;
  int lastColumn_ = -1;
  uint32_t lastValues_[4] = {kNoName, kNoName, kNoName, kNoName};
};

}  // namespace proton::viewer
