#include "viewer/tree_view.h"

#include <gtest/gtest.h>

#include <string>

#include "viewer/hatchet_reader.h"
#include "viewer/tree_render.h"

namespace proton::viewer {
namespace {

// ROOT
// ├─ fwd            (t 1)
// │  ├─ __proton_launch_metadata / meta (t 100)
// │  └─ gemm        (t 4, c 2)
// ├─ wrapper        (no metrics; only launch metadata below)
// │  └─ __proton_launch_metadata
// └─ bwd            (t 8, c 1)
std::string node(const std::string &name, const std::string &metrics,
                 const std::string &children = "") {
  return R"({"frame":{"name":")" + name + R"(","type":"function"},"metrics":{)" + metrics +
         R"(},"children":[)" + children + "]}";
}

TreeColumns sample() {
  std::string meta = node("__proton_launch_metadata", "", node("meta", R"("t":100)"));
  std::string doc = "[" +
                    node("ROOT", R"("t":0,"c":0)",
                         node("fwd", R"("t":1)", meta + "," + node("gemm", R"("t":4,"c":2)")) +
                             "," + node("wrapper", "", node("__proton_launch_metadata", "")) + "," +
                             node("bwd", R"("t":8,"c":1)")) +
                    ",{}]";
  TreeColumns tree;
  EXPECT_TRUE(readHatchetJson(doc, &tree).isOk());
  return tree;
}

std::vector<std::string> keptNames(const TreeColumns &tree, const std::vector<uint8_t> &keep) {
  std::vector<std::string> out;
  for (size_t i = 0; i < tree.size(); ++i) {
    if (keep[i]) out.push_back(tree.strings[tree.nameIds[i]]);
  }
  return out;
}

std::vector<std::string> namesOf(const TreeColumns &tree, const std::vector<int32_t> &order) {
  std::vector<std::string> out;
  for (int32_t i : order) out.push_back(tree.strings[tree.nameIds[i]]);
  return out;
}

std::vector<uint8_t> maskOf(const TreeColumns &tree, const std::string &name) {
  std::vector<uint8_t> mask(tree.strings.size());
  for (size_t k = 0; k < tree.strings.size(); ++k) mask[k] = tree.strings[k] == name;
  return mask;
}

TEST(TreeView, HidesLaunchMetadataAndParentsLeftEmpty) {
  TreeColumns tree = sample();
  auto keep = selectNodes(tree, {"__proton_launch_metadata", nullptr, nullptr});
  EXPECT_EQ(keptNames(tree, keep), (std::vector<std::string>{"ROOT", "fwd", "gemm", "bwd"}));
}

TEST(TreeView, IncludeKeepsAncestorsAndSubtreesExcludeDropsSubtrees) {
  TreeColumns tree = sample();
  auto gemm = maskOf(tree, "gemm");
  auto fwd = maskOf(tree, "fwd");
  auto keep = selectNodes(tree, {"__proton_launch_metadata", &gemm, nullptr});
  EXPECT_EQ(keptNames(tree, keep), (std::vector<std::string>{"ROOT", "fwd", "gemm"}));
  keep = selectNodes(tree, {"", nullptr, &fwd});
  EXPECT_EQ(keptNames(tree, keep),
            (std::vector<std::string>{"ROOT", "wrapper", "__proton_launch_metadata", "bwd"}));
}

TEST(TreeView, MetricKindsFollowThePythonDictOrder) {
  // Children before metrics (Triton's key order): "b" is read first but ROOT lists "a".
  const char *doc =
      R"J([{"children":[{"children":[],"frame":{"name":"k"},"metrics":{"b":1,"a":"x"}}],)J"
      R"J("frame":{"name":"ROOT"},"metrics":{"a":2}},{}])J";
  TreeColumns tree;
  ASSERT_TRUE(readHatchetJson(doc, &tree).isOk());
  std::vector<uint8_t> all(tree.size(), 1);
  auto kinds = keptMetricKinds(tree, all);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(tree.metrics[kinds[0].column].name, "a");
  EXPECT_FALSE(kinds[0].number);  // the last value, on k, is a string
  EXPECT_EQ(tree.metrics[kinds[1].column].name, "b");
  EXPECT_TRUE(kinds[1].number);
}

// sample() with launch metadata hidden, and an evaluator on it.
struct HiddenSample {
  TreeColumns tree = sample();
  std::vector<uint8_t> keep = selectNodes(tree, {"__proton_launch_metadata", nullptr, nullptr});
  ColumnEvaluator eval{tree, keep, std::vector<uint8_t>(tree.metrics.size())};
};

TEST(TreeView, DerivedColumnsUsePythonsArithmetic) {
  HiddenSample s;
  ColumnEvaluator &eval = s.eval;
  std::vector<CellValue> v;
  eval.evaluate({ColumnOp::kInclusive, 0}, &v);
  EXPECT_EQ(v[0].kind, CellValue::kInt);
  EXPECT_EQ(v[0].i, 13);  // the hidden meta kernel does not count
  eval.evaluate({ColumnOp::kScaled, 0, -1, -3}, &v);
  EXPECT_EQ(v[0].kind, CellValue::kDouble);
  EXPECT_EQ(v[0].d, 13 / 1000.0);
  eval.evaluate({ColumnOp::kAverage, 0, 1, 0}, &v);
  EXPECT_EQ(v[0].d, 13 / 3.0);
  EXPECT_EQ(v[1].d, 5 / 2.0);  // fwd: (1 + 4) / 2
  eval.evaluate({ColumnOp::kPercent, 0}, &v);
  EXPECT_EQ(v[4].d, 4 * 100 / 13.0);  // gemm (node 4, after the hidden frames)
}

// Beyond int64 the viewer computes in floats (py_number.h).
TEST(TreeView, IntegerOverflowBecomesAFloat) {
  std::string big = std::to_string(INT64_MAX);
  std::string doc =
      "[" + node("ROOT", R"("t":0)", node("a", "\"t\":" + big) + "," + node("b", R"("t":1)")) +
      ",{}]";
  TreeColumns tree;
  ASSERT_TRUE(readHatchetJson(doc, &tree).isOk());
  std::vector<uint8_t> keep(tree.size(), 1);
  ColumnEvaluator eval(tree, keep, std::vector<uint8_t>(tree.metrics.size()));
  std::vector<CellValue> v;
  eval.evaluate({ColumnOp::kInclusive, 0}, &v);
  EXPECT_EQ(v[0].kind, CellValue::kDouble);
  EXPECT_EQ(v[0].d, 9223372036854775808.0);
  EXPECT_EQ(v[2].kind, CellValue::kInt);
  eval.evaluate({ColumnOp::kScaled, 0, -1, -9}, &v);
  EXPECT_EQ(v[1].d, 9223372036.854775807);
}

TEST(TreeView, ThresholdKeepsAncestorsAndDepthCutsBelow) {
  HiddenSample s;
  const TreeColumns &tree = s.tree;
  const std::vector<uint8_t> &keep = s.keep;
  std::vector<CellValue> v;
  s.eval.evaluate({ColumnOp::kInclusive, 0}, &v);
  auto depths = nodeDepths(tree.parents);
  EXPECT_EQ(namesOf(tree, visibleNodes(tree.parents, depths, keep, v, 4.0, std::nullopt)),
            (std::vector<std::string>{"ROOT", "fwd", "gemm", "bwd"}));
  EXPECT_EQ(namesOf(tree, visibleNodes(tree.parents, depths, keep, v, 6.5, 2)),
            (std::vector<std::string>{"ROOT", "bwd"}));
}

TEST(TreeView, ComparesIntsAndFloatsExactlyAsPython) {
  EXPECT_TRUE(lessThan(CellValue::ofInt(INT64_MAX), CellValue::ofDouble(9.3e18)));
  EXPECT_FALSE(
      lessThan(CellValue::ofInt((int64_t{1} << 53) + 1), CellValue::ofDouble(9007199254740992.0)));
  EXPECT_TRUE(
      lessThan(CellValue::ofDouble(9007199254740992.0), CellValue::ofInt((int64_t{1} << 53) + 1)));
  EXPECT_FALSE(lessThan(CellValue::ofDouble(0.0 / 0.0), CellValue::ofInt(1)));
  EXPECT_EQ(trueDivide(CellValue::ofInt(7), CellValue::ofInt(2)).d, 3.5);
  CellValue sum = add(CellValue::ofInt(INT64_MAX), CellValue::ofInt(1));
  EXPECT_EQ(sum.kind, CellValue::kDouble);
  EXPECT_EQ(add(CellValue::ofInt(2), CellValue::ofInt(3)).i, 5);
}

TEST(TreeRender, ColoursTheFirstColumnAndListsSortedFrames) {
  std::vector<int32_t> parents{-1, 0, 0}, depths{0, 1, 1};
  std::vector<std::string_view> names{"ROOT", "a", "b"};
  std::vector<CellValue> values{CellValue::ofInt(10), CellValue::ofInt(2), CellValue::ofInt(8)};
  TreeTable table{&parents, &depths, nullptr, &names, {&values}, {"t"}, {1}};
  std::string text;
  {
    TextSink sink(&text);
    writeTreeLines(table, {0, 1, 2}, /*color=*/true, &sink);
    writeSortedLines(table, {0, 1, 2}, &sink);
  }
  EXPECT_EQ(text.substr(0, text.find("\nLegend")),
            " t  name\n\033[38;5;196m10\033[0m  ROOT\n\033[38;5;28m 2\033[0m  \u251c\u2500 a\n"
            "\033[38;5;208m 8\033[0m  \u2514\u2500 b\n");
  EXPECT_NE(text.find("Legend (t: min 2, max 10)\n\033[38;5;196m\u2588\033[0m 9.200 - 10.000\n"),
            std::string::npos);
  EXPECT_NE(text.find("Sorted kernels by metric t\nb" + std::string(104, ' ') + " 8\na"),
            std::string::npos);
}

// avg_time: GPU time per launch, so the counts of nodes without a time (an instrumented
// kernel's scopes, 8192 runs of "load") are not launches; avg_cpu_time keeps every count.
TEST(TreeView, TimedAverageCountsOnlyNodesThatCarryTheTime) {
  std::string doc = "[" +
                    node("ROOT", R"("t":0,"c":0)",
                         node("kern", R"("t":100,"c":1)", node("load", R"("c":8192)"))) +
                    ",{}]";
  TreeColumns tree;
  ASSERT_TRUE(readHatchetJson(doc, &tree).isOk());
  ASSERT_EQ(tree.metrics[0].name, "t");
  std::vector<uint8_t> keep(tree.size(), 1);
  ColumnEvaluator eval(tree, keep, std::vector<uint8_t>(tree.metrics.size()));
  std::vector<CellValue> v;
  eval.evaluate({ColumnOp::kTimedAverage, 0, 1, 0}, &v);
  EXPECT_EQ(v[0].d, 100.0);  // ROOT: 100 / its own 0 and kern's 1
  EXPECT_EQ(v[1].d, 100.0);
  EXPECT_TRUE(v[2].isNone());  // load: no time, so no launch
  eval.evaluate({ColumnOp::kAverage, 0, 1, 0}, &v);
  EXPECT_EQ(v[1].d, 100 / 8193.0);
}

}  // namespace
}  // namespace proton::viewer
