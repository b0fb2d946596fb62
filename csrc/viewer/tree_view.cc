#include "viewer/tree_view.h"

#include <algorithm>
#include <cstring>

namespace proton::viewer {
namespace {

CellValue cellAt(const MetricColumn &m, size_t i) {
  uint64_t bits = m.values[i];
  if (m.kinds[i] == ValueKind::kInt) {
    int64_t v;
    std::memcpy(&v, &bits, 8);
    return CellValue::ofInt(v);
  }
  if (m.kinds[i] == ValueKind::kDouble) {
    double d;
    std::memcpy(&d, &bits, 8);
    return CellValue::ofDouble(d);
  }
  return CellValue::none();
}

// A nonzero int or float among the node's own metrics.
bool hasNumber(const TreeColumns &tree, size_t i) {
  for (const MetricColumn &m : tree.metrics) {
    if (cellAt(m, i).isTrue()) return true;
  }
  return false;
}

std::vector<int32_t> subtreeEnds(const std::vector<int32_t> &parents) {
  size_t n = parents.size();
  std::vector<int32_t> size(n, 1);
  for (size_t i = n; i-- > 1;) size[parents[i]] += size[i];
  for (size_t i = 0; i < n; ++i) size[i] += static_cast<int32_t>(i);
  return size;
}

// hide_launch_metadata: frames named `hidden` (not ROOT) go with their subtrees, and so do
// nodes left without children that had only such frames and no number of their own.
void hideFrames(const TreeColumns &tree, uint32_t hidden, std::vector<uint8_t> *keep) {
  size_t n = tree.size();
  std::vector<int32_t> ends = subtreeEnds(tree.parents);
  std::vector<uint8_t> hadRemovedChild(n), keptChild(n);
  for (size_t i = 1; i < n;) {
    if (tree.nameIds[i] == hidden) {
      std::fill(keep->begin() + i, keep->begin() + ends[i], 0);
      hadRemovedChild[tree.parents[i]] = 1;
      i = ends[i];
    } else {
      ++i;
    }
  }
  for (size_t i = n; i-- > 1;) {
    if (!(*keep)[i]) continue;
    int32_t p = tree.parents[i];
    if (hadRemovedChild[i] && !keptChild[i] && !hasNumber(tree, i)) {
      (*keep)[i] = 0;
      hadRemovedChild[p] = 1;
    } else {
      keptChild[p] = 1;
    }
  }
}

// model.select's include: the kept frames matching, their subtrees and their ancestors.
void includeFrames(const TreeColumns &tree, const std::vector<uint8_t> &match,
                   std::vector<uint8_t> *keep) {
  size_t n = tree.size();
  std::vector<uint8_t> inMatch(n), below(n);
  auto matches = [&](size_t i) { return (*keep)[i] && match[tree.nameIds[i]]; };
  inMatch[0] = matches(0);
  for (size_t i = 1; i < n; ++i)
    inMatch[i] = (*keep)[i] && (matches(i) || inMatch[tree.parents[i]]);
  for (size_t i = n; i-- > 1;) {
    if ((*keep)[i] && (matches(i) || below[i])) below[tree.parents[i]] = 1;
  }
  for (size_t i = 1; i < n; ++i) (*keep)[i] = (*keep)[i] && (inMatch[i] || below[i]);
}

// model.select's exclude: kept frames (not ROOT) matching go with their subtrees.
void excludeFrames(const TreeColumns &tree, const std::vector<uint8_t> &match,
                   std::vector<uint8_t> *keep) {
  size_t n = tree.size();
  std::vector<uint8_t> dropped(n);
  for (size_t i = 1; i < n; ++i) {
    if (!(*keep)[i]) continue;
    dropped[i] = match[tree.nameIds[i]] || dropped[tree.parents[i]];
    if (dropped[i]) (*keep)[i] = 0;
  }
}

int64_t powerOfTen(int exponent) {
  int64_t v = 1;
  for (int k = 0; k < exponent; ++k) v *= 10;
  return v;
}

// v * 10^exponent, or v / 10^-exponent (an int stays an int when multiplied).
CellValue scale(const CellValue &v, int exponent) {
  if (exponent == 0) return v;
  CellValue factor = CellValue::ofInt(powerOfTen(exponent < 0 ? -exponent : exponent));
  return exponent > 0 ? multiply(v, factor) : trueDivide(v, factor);
}

}  // namespace

std::vector<uint8_t> selectNodes(const TreeColumns &tree, const NodeSelection &selection) {
  std::vector<uint8_t> keep(tree.size(), 1);
  if (tree.size() == 0) return {};
  if (!selection.hiddenName.empty()) {
    auto it = std::find(tree.strings.begin(), tree.strings.end(), selection.hiddenName);
    if (it != tree.strings.end()) {
      hideFrames(tree, static_cast<uint32_t>(it - tree.strings.begin()), &keep);
    }
  }
  if (selection.include != nullptr) includeFrames(tree, *selection.include, &keep);
  if (selection.exclude != nullptr) excludeFrames(tree, *selection.exclude, &keep);
  return keep;
}

std::vector<MetricKind> keptMetricKinds(const TreeColumns &tree, const std::vector<uint8_t> &keep) {
  struct Seen {
    size_t first;
    int column;
    bool number;
  };
  std::vector<Seen> seen;
  for (size_t k = 0; k < tree.metrics.size(); ++k) {
    const MetricColumn &m = tree.metrics[k];
    size_t first = tree.size(), last = 0;
    for (size_t i = 0; i < tree.size(); ++i) {
      if (!keep[i] || m.kinds[i] == ValueKind::kAbsent) continue;
      first = std::min(first, i);
      last = i;
    }
    if (first == tree.size()) continue;
    bool number = m.kinds[last] == ValueKind::kInt || m.kinds[last] == ValueKind::kDouble;
    seen.push_back({first, static_cast<int>(k), number});
  }
  // A node lists its keys in column order, so (first node, column) is Python's dict order.
  std::sort(seen.begin(), seen.end(), [](const Seen &a, const Seen &b) {
    return a.first != b.first ? a.first < b.first : a.column < b.column;
  });
  std::vector<MetricKind> out;
  for (const Seen &s : seen) out.push_back({s.column, s.number});
  return out;
}

ColumnEvaluator::ColumnEvaluator(const TreeColumns &tree, const std::vector<uint8_t> &keep,
                                 std::vector<uint8_t> exclusive)
    : tree_(tree),
      keep_(keep),
      exclusive_(std::move(exclusive)),
      inclusive_(tree.metrics.size()),
      zeros_(tree.size(), CellValue::ofInt(0)) {
  exclusive_.resize(tree.metrics.size());
}

const std::vector<CellValue> &ColumnEvaluator::inclusive(int column) {
  if (column < 0 || static_cast<size_t>(column) >= tree_.metrics.size()) return zeros_;
  if (inclusive_[column]) return *inclusive_[column];
  const MetricColumn &m = tree_.metrics[column];
  size_t n = tree_.size();
  std::vector<CellValue> out(n);
  for (size_t i = 0; i < n; ++i) {  // what is not a number counts as 0
    out[i] = cellAt(m, i);
    if (out[i].isNone()) out[i] = CellValue::ofInt(0);
  }
  if (!exclusive_[column]) sumUp(&out);
  inclusive_[column] = std::move(out);
  return *inclusive_[column];
}

void ColumnEvaluator::sumUp(std::vector<CellValue> *values) const {
  for (size_t i = values->size(); i-- > 1;) {
    if (!keep_[i]) continue;
    CellValue &parent = (*values)[tree_.parents[i]];
    parent = add(parent, (*values)[i]);
  }
}

std::vector<CellValue> ColumnEvaluator::inclusiveWhere(int column, int where) const {
  size_t columns = tree_.metrics.size();
  std::vector<CellValue> out(tree_.size(), CellValue::ofInt(0));
  if (column < 0 || where < 0 || static_cast<size_t>(std::max(column, where)) >= columns) {
    return out;
  }
  const MetricColumn &m = tree_.metrics[column];
  const MetricColumn &have = tree_.metrics[where];
  for (size_t i = 0; i < out.size(); ++i) {
    CellValue v = cellAt(m, i);
    if (!v.isNone() && !cellAt(have, i).isNone()) out[i] = v;
  }
  if (!exclusive_[column]) sumUp(&out);
  return out;
}

void ColumnEvaluator::scaled(int column, int exponent, std::vector<CellValue> *out) {
  const std::vector<CellValue> &base = inclusive(column);
  out->resize(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    if (keep_[i]) (*out)[i] = scale(base[i], exponent);
  }
}

void ColumnEvaluator::evaluate(const ColumnRecipe &recipe, std::vector<CellValue> *out) {
  size_t n = tree_.size();
  if (recipe.source < 0 || static_cast<size_t>(recipe.source) >= tree_.metrics.size()) {
    out->assign(n, CellValue::none());
    return;
  }
  switch (recipe.op) {
    case ColumnOp::kInclusive:
      *out = inclusive(recipe.source);
      return;
    case ColumnOp::kOwn: {
      const MetricColumn &m = tree_.metrics[recipe.source];
      out->resize(n);
      for (size_t i = 0; i < n; ++i) (*out)[i] = cellAt(m, i);
      return;
    }
    case ColumnOp::kScaled:
      scaled(recipe.source, recipe.exponent, out);
      return;
    case ColumnOp::kAverage:
    case ColumnOp::kTimedAverage: {
      // GPU time per launch counts only the counts of nodes that carry a time (a kernel's
      // intra-kernel scopes count their runs, not launches).
      std::vector<CellValue> counts = recipe.op == ColumnOp::kAverage
                                          ? inclusive(recipe.other)
                                          : inclusiveWhere(recipe.other, recipe.source);
      scaled(recipe.source, recipe.exponent, out);
      for (size_t i = 0; i < n; ++i) {
        if (!keep_[i]) continue;
        CellValue &v = (*out)[i];
        v = counts[i].isTrue() ? trueDivide(v, counts[i]) : CellValue::none();
      }
      return;
    }
    case ColumnOp::kRate: {
      const std::vector<CellValue> &amounts = inclusive(recipe.source);
      const std::vector<CellValue> &times = inclusive(recipe.other);
      out->assign(n, CellValue::none());
      CellValue divisor = CellValue::ofInt(recipe.divisor);
      for (size_t i = 0; i < n; ++i) {
        if (!keep_[i]) continue;
        CellValue seconds = scale(times[i], recipe.exponent);
        if (seconds.isTrue()) (*out)[i] = trueDivide(trueDivide(amounts[i], seconds), divisor);
      }
      return;
    }
    case ColumnOp::kPercent: {
      // Of ROOT's value; an exclusive metric is never summed into ROOT: of the kept nodes' sum.
      const std::vector<CellValue> &values = inclusive(recipe.source);
      CellValue total = values[0];
      if (exclusive_[recipe.source]) {
        total = CellValue::ofInt(0);
        for (size_t i = 0; i < n; ++i) {
          if (keep_[i]) total = add(total, values[i]);
        }
      }
      out->assign(n, CellValue::none());
      if (!total.isTrue()) return;
      for (size_t i = 0; i < n; ++i) {
        if (keep_[i]) (*out)[i] = trueDivide(multiply(values[i], CellValue::ofInt(100)), total);
      }
      return;
    }
  }
  out->assign(n, CellValue::none());
}

std::vector<int32_t> nodeDepths(const std::vector<int32_t> &parents) {
  std::vector<int32_t> depth(parents.size());
  for (size_t i = 1; i < parents.size(); ++i) depth[i] = depth[parents[i]] + 1;
  return depth;
}

std::vector<int32_t> visibleNodes(const std::vector<int32_t> &parents,
                                  const std::vector<int32_t> &depths,
                                  const std::vector<uint8_t> &keep,
                                  const std::vector<CellValue> &first,
                                  std::optional<double> threshold, std::optional<int64_t> depth) {
  size_t n = parents.size();
  std::vector<uint8_t> shown;
  if (threshold) {
    double t = *threshold;
    shown.assign(n, 0);
    for (size_t i = n; i-- > 1;) {
      if (!keep[i]) continue;
      const CellValue &v = first[i];
      bool above = v.kind == CellValue::kDouble ? v.d >= t
                   : v.kind == CellValue::kInt  ? !std::isnan(t) && compareIntDouble(v.i, t) >= 0
                                                : false;
      if (shown[i] || above) shown[i] = shown[parents[i]] = 1;
    }
  } else {
    shown = keep;
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || (shown[i] && !(depth && depths[i] >= *depth))) {
      order.push_back(static_cast<int32_t>(i));
    }
  }
  return order;
}

}  // namespace proton::viewer
