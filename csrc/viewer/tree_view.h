// The viewer's model on C++ columns: which frames of a TreeColumns are kept (launch
// metadata hidden, -i/-e), which metrics the kept frames have, metric columns derived with
// Python's arithmetic, and which frames a -t/-d report shows. Mirrors model.py, derive.py
// and render.visible_nodes so that the C++ report equals the Python one.
//
//   std::vector<uint8_t> keep = selectNodes(tree, {kLaunchMetadata, &includeMask, nullptr});
//   ColumnEvaluator eval(tree, keep, exclusiveColumns);
//   std::vector<CellValue> seconds;
//   if (!eval.evaluate({ColumnOp::kScaled, timeColumn, -1, -9}, &seconds)) { /* Python */ }
//
// Masks are per node (keep[i]) or per string id (include[nameIds[i]]). Pure functions and
// a single-owner evaluator; not thread-safe to share an evaluator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "viewer/py_number.h"
#include "viewer/tree_columns.h"

namespace proton::viewer {

struct NodeSelection {
  std::string hiddenName;  // frames so named are dropped with their subtrees; "" for none
  const std::vector<uint8_t> *include = nullptr;  // per string id: matches -i; null: no -i
  const std::vector<uint8_t> *exclude = nullptr;  // per string id: matches -e; null: no -e
};

// keep[i] for every node, as model.hide_launch_metadata and then model.select decide; an
// empty vector when ROOT itself is hidden (left to Python).
std::vector<uint8_t> selectNodes(const TreeColumns &tree, const NodeSelection &selection);

// The metrics of the kept nodes in Python's order (first seen in pre-order, then key order),
// each with whether its last kept value is a number (Profile._metric_kinds).
struct MetricKind {
  int column;
  bool number;
};
std::vector<MetricKind> keptMetricKinds(const TreeColumns &tree, const std::vector<uint8_t> &keep);

// One derive.py column recipe. Exponents are decimal (ns = -9).
enum class ColumnOp : uint8_t {
  kInclusive,     // inclusive(source)
  kOwn,           // source's own numeric value, None elsewhere (exclusive metrics)
  kScaled,        // inclusive(source) * 10^exponent (exponent may be negative)
  kAverage,       // kScaled / inclusive(other), None where that is 0
  kTimedAverage,  // kAverage, counting only the `other` of nodes that carry source (launches)
  kRate,          // inclusive(source) / (inclusive(other) * 10^exponent) / divisor
  kPercent,       // inclusive(source) * 100 / ROOT's (or, for exclusive sources, the sum)
};
struct ColumnRecipe {
  ColumnOp op = ColumnOp::kInclusive;
  int source = -1;  // metric column
  int other = -1;   // kAverage: count; kRate: time
  int exponent = 0;
  int64_t divisor = 1;
};

class ColumnEvaluator {
 public:
  // exclusive: per metric column, whether readers do not sum it into parents.
  ColumnEvaluator(const TreeColumns &tree, const std::vector<uint8_t> &keep,
                  std::vector<uint8_t> exclusive);

  // One value per node (meaningful on kept nodes); false where Python's arithmetic could
  // give another answer (int64 overflow, integer division beyond 2^53, a float sum).
  bool evaluate(const ColumnRecipe &recipe, std::vector<CellValue> *out);

 private:
  // Profile.inclusive(column) over the kept nodes; null on overflow.
  const std::vector<CellValue> *inclusive(int column);
  // The same, counting only the nodes that carry a number in column `where`; false on overflow.
  bool inclusiveWhere(int column, int where, std::vector<CellValue> *out) const;
  // Adds each kept node's value into its parent's, deepest first; false on overflow.
  bool sumUp(std::vector<CellValue> *values) const;
  bool scaled(int column, int exponent, std::vector<CellValue> *out);

  const TreeColumns &tree_;
  const std::vector<uint8_t> &keep_;
  std::vector<uint8_t> exclusive_;
  std::vector<std::optional<std::vector<CellValue>>> inclusive_;
  std::vector<uint8_t> overflowed_;
};

// depths[i]: levels below ROOT.
std::vector<int32_t> nodeDepths(const std::vector<int32_t> &parents);

// render.visible_nodes over the kept nodes, as the ascending list of shown nodes: those
// whose first value is >= threshold with their ancestors (all kept ones without a
// threshold), less those `depth` or more levels down; ROOT always.
std::vector<int32_t> visibleNodes(const std::vector<int32_t> &parents,
                                  const std::vector<int32_t> &depths,
                                  const std::vector<uint8_t> &keep,
                                  const std::vector<CellValue> &first,
                                  std::optional<double> threshold, std::optional<int64_t> depth);

}  // namespace proton::viewer
