#include "viewer/tree_merge.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "viewer/hatchet_reader.h"

namespace proton::viewer {
namespace {

std::string node(const std::string &name, const std::string &metrics,
                 const std::string &children = "") {
  return R"({"frame":{"name":")" + name + R"(","type":"function"},"metrics":{)" + metrics +
         R"(},"children":[)" + children + "]}";
}

TreeColumns read(const std::string &root) {
  TreeColumns tree;
  EXPECT_TRUE(readHatchetJson("[" + root + ",{}]", &tree).isOk());
  return tree;
}

// "name/name/...: metrics" per node in pre-order, metrics as "key=value" by column.
std::vector<std::string> describe(const TreeColumns &tree) {
  std::vector<std::string> out;
  for (size_t i = 0; i < tree.size(); ++i) {
    std::string path;
    for (int32_t at = static_cast<int32_t>(i); at >= 0; at = tree.parents[at]) {
      path = tree.strings[tree.nameIds[at]] + (path.empty() ? "" : "/") + path;
    }
    std::string line = path + ":";
    for (const MetricColumn &m : tree.metrics) {
      if (m.kinds[i] == ValueKind::kAbsent) continue;
      line += " " + m.name + "=";
      if (m.kinds[i] == ValueKind::kInt) {
        int64_t v;
        std::memcpy(&v, &m.values[i], 8);
        line += std::to_string(v);
      } else if (m.kinds[i] == ValueKind::kString) {
        line += tree.strings[m.values[i]];
      } else {
        double d;
        std::memcpy(&d, &m.values[i], 8);
        line += std::to_string(d);
      }
    }
    out.push_back(line);
  }
  return out;
}

TEST(TreeMerge, UnionByPathAddsNumbersAndKeepsTheFirstString) {
  TreeColumns a = read(node("ROOT", "", node("step", R"("t":1,"tag":"a")", node("k", R"("t":2)"))));
  TreeColumns b = read(
      node("ROOT", "", node("other", R"("t":5)") + "," + node("step", R"("t":3.5,"tag":"b")")));
  MergeInput inA = pathsOf(a, nullptr), inB = pathsOf(b, nullptr);
  std::vector<std::vector<int32_t>> maps;
  TreeColumns both = mergeTrees({&inA, &inB}, &maps);
  EXPECT_EQ(describe(both), (std::vector<std::string>{"ROOT:", "ROOT/step: t=4.500000 tag=a",
                                                      "ROOT/step/k: t=2", "ROOT/other: t=5"}));
  EXPECT_EQ(maps[0], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(maps[1], (std::vector<int32_t>{0, 3, 1}));
}

TEST(TreeMerge, SubsetKeepsOrderAndDuplicates) {
  TreeColumns t = read(node("ROOT", "",
                            node("x", R"("t":1)") + "," + node("x", R"("t":2)") + "," +
                                node("y", R"("t":3)", node("z", R"("t":4)"))));
  TreeColumns sub = subsetTree(t, {1, 1, 1, 0, 0});
  EXPECT_EQ(describe(sub), (std::vector<std::string>{"ROOT:", "ROOT/x: t=1", "ROOT/x: t=2"}));
}

// train.py:1 -> lib a -> lib b -> { k1, lib c -> k2 }; lib d (own metrics) -> lib e -> k3.
TEST(TreeMerge, FoldsRunsOfLibraryFramesWhereTheyAreLeft) {
  TreeColumns t = read(node(
      "ROOT", "",
      node("/p/train.py:1@main", "",
           node("/sp/a.py:1@a", "",
                node("/sp/b.py:2@b", "",
                     node("k1", R"("t":1)") + "," +
                         node("/sp/c.py:3@c", "", node("k2", R"("t":2)")))) +
               "," +
               node("/sp/d.py:4@d", R"("t":10)", node("/sp/e.py:5@e", "", node("k3", R"("t":3)"))) +
               "," + node("/sp/x.py:9@x", "", node("scope", "", node("/sp/y.py:9@y", ""))))));
  std::vector<FrameLabel> labels(t.strings.size());
  for (size_t s = 0; s < t.strings.size(); ++s) {
    const std::string &name = t.strings[s];
    if (name.rfind("/sp/", 0) == 0) labels[s] = {true, true, name.substr(4)};
    if (name.rfind("/p/", 0) == 0) labels[s] = {true, false, name.substr(3)};
  }
  MergeInput folded = foldFrames(t, nullptr, labels, /*fold=*/true);
  EXPECT_EQ(describe(mergeTrees({&folded}, nullptr)),
            (std::vector<std::string>{
                "ROOT:",
                "ROOT/train.py:1@main:",
                "ROOT/train.py:1@main/a.py:1@a (+1):",
                "ROOT/train.py:1@main/a.py:1@a (+1)/k1: t=1",
                "ROOT/train.py:1@main/a.py:1@a (+2):",
                "ROOT/train.py:1@main/a.py:1@a (+2)/k2: t=2",
                "ROOT/train.py:1@main/d.py:4@d: t=10",
                "ROOT/train.py:1@main/d.py:4@d (+1):",
                "ROOT/train.py:1@main/d.py:4@d (+1)/k3: t=3",
                "ROOT/train.py:1@main/x.py:9@x:",
                "ROOT/train.py:1@main/x.py:9@x/scope:",
                "ROOT/train.py:1@main/x.py:9@x/scope/y.py:9@y:",
            }));
  MergeInput shortened = foldFrames(t, nullptr, labels, /*fold=*/false);
  TreeColumns all = mergeTrees({&shortened}, nullptr);
  EXPECT_EQ(all.size(), t.size());
  EXPECT_EQ(describe(all)[3], "ROOT/train.py:1@main/a.py:1@a/b.py:2@b:");
}

}  // namespace
}  // namespace proton::viewer
