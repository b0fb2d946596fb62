// The viewer's model on C++ columns, its one implementation: which frames of a TreeColumns
// are kept (launch metadata hidden, -i/-e), which metrics the kept frames have, inclusive
// sums and every derived metric column but `util` (derive.py's recipes), and which frames a
// -t/-d report shows. proton-viewer's one-file report (fast_report.py) runs it on the file's
// columns; proton.viewer's Profile, derive() and render() run it on the same columns built
// from Python (bind_viewer.cc), so both give one answer.
//
//   std::vector<uint8_t> keep = selectNodes(tree, {kLaunchMetadata, &includeMask, nullptr});
//   ColumnEvaluator eval(tree, keep, exclusiveColumns);
//   std::vector<CellValue> seconds;
//   eval.evaluate({ColumnOp::kScaled, timeColumn, -1, -9}, &seconds);
//
// Masks are per node (keep[i]) or per string id (include[nameIds[i]]). Arithmetic is
// py_number.h's. Pure functions and a single-owner evaluator; not thread-safe to share an
// evaluator.
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

// keep[i] for every node: frames named hiddenName go with their subtrees, and so do nodes
// left without children that had only such frames and no nonzero number of their own
// (ROOT always stays); then -i keeps the paths through matching frames (their ancestors and
// subtrees) and -e drops matching frames (not ROOT) with their subtrees.
std::vector<uint8_t> selectNodes(const TreeColumns &tree, const NodeSelection &selection);

// The metrics of the kept nodes in first-seen order (by node in pre-order, then column),
// each with whether its last kept value is a number (Profile.metric_names lists those).
struct MetricKind {
  int column;
  bool number;
};
std::vector<MetricKind> keptMetricKinds(const TreeColumns &tree, const std::vector<uint8_t> &keep);

// One derive.py column recipe (derive.Recipe). Exponents are decimal (ns = -9). Values that
// are not numbers count as 0 in sums; "None" cells are shown as "-".
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

  // One value per node (meaningful on kept nodes); a column of Nones when recipe.source is
  // not a metric column.
  void evaluate(const ColumnRecipe &recipe, std::vector<CellValue> *out);

  // Each kept node's own number in `column` (0 where it has none) plus those of its kept
  // descendants; exclusive columns are not summed. Zeros for a column that does not exist.
  const std::vector<CellValue> &inclusive(int column);
  // The same, counting only the nodes that carry a number in column `where`.
  std::vector<CellValue> inclusiveWhere(int column, int where) const;

 private:
  // Adds each kept node's value into its parent's, deepest first.
  void sumUp(std::vector<CellValue> *values) const;
  void scaled(int column, int exponent, std::vector<CellValue> *out);

  const TreeColumns &tree_;
  const std::vector<uint8_t> &keep_;
  std::vector<uint8_t> exclusive_;
  std::vector<std::optional<std::vector<CellValue>>> inclusive_;
  std::vector<CellValue> zeros_;
};

// depths[i]: levels below ROOT.
std::vector<int32_t> nodeDepths(const std::vector<int32_t> &parents);

// The nodes a report shows (render.visible_nodes) over the kept nodes, as the ascending list of
// shown nodes: those whose first value is >= threshold with their ancestors (all kept ones without
// a threshold), less those `depth` or more levels down; ROOT always.
std::vector<int32_t> visibleNodes(const std::vector<int32_t> &parents,
                                  const std::vector<int32_t> &depths,
                                  const std::vector<uint8_t> &keep,
                                  const std::vector<CellValue> &first,
                                  std::optional<double> threshold, std::optional<int64_t> depth);

}  // namespace proton::viewer
