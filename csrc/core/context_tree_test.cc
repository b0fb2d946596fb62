#include "core/context_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/string_table.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }

std::vector<NodeId> children(const ContextTree &tree, NodeId parent) {
  std::vector<NodeId> out;
  for (NodeId c = tree.node(parent).firstChild; c != kNoNode; c = tree.node(c).nextSibling)
    out.push_back(c);
  return out;
}

TEST(ContextTreeTest, NewTreeHasOnlyRoot) {
  ContextTree tree(S("ROOT"));
  EXPECT_EQ(tree.size(), 1u);
  const ContextNode &root = tree.node(kRootNode);
  EXPECT_EQ(root.name, S("ROOT"));
  EXPECT_EQ(root.parent, kNoNode);
  EXPECT_EQ(root.firstChild, kNoNode);
  EXPECT_EQ(root.lastChild, kNoNode);
  EXPECT_EQ(root.nextSibling, kNoNode);
  EXPECT_EQ(root.depth, 0u);
  EXPECT_EQ(ContextTree().node(kRootNode).name, StringId{});
}

TEST(ContextTreeTest, ChildIsCreatedOnceAndFoundAfter) {
  ContextTree tree;
  EXPECT_EQ(tree.findChild(kRootNode, S("forward")), kNoNode);
  NodeId a = tree.child(kRootNode, S("forward"));
  EXPECT_EQ(a, NodeId{1});
  EXPECT_EQ(tree.child(kRootNode, S("forward")), a);
  EXPECT_EQ(tree.findChild(kRootNode, S("forward")), a);
  EXPECT_EQ(tree.size(), 2u);
  const ContextNode &n = tree.node(a);
  EXPECT_EQ(n.parent, kRootNode);
  EXPECT_EQ(n.name, S("forward"));
  EXPECT_EQ(n.depth, 1u);
}

TEST(ContextTreeTest, SameNameUnderDifferentParentsIsDifferentNodes) {
  ContextTree tree;
  NodeId a = tree.child(kRootNode, S("a"));
  NodeId b = tree.child(kRootNode, S("b"));
  NodeId aGemm = tree.child(a, S("gemm"));
  NodeId bGemm = tree.child(b, S("gemm"));
  EXPECT_NE(aGemm, bGemm);
  EXPECT_EQ(tree.findChild(a, S("gemm")), aGemm);
  EXPECT_EQ(tree.findChild(b, S("gemm")), bGemm);
  EXPECT_EQ(tree.findChild(kRootNode, S("gemm")), kNoNode);
  EXPECT_EQ(tree.node(bGemm).parent, b);
}

TEST(ContextTreeTest, ChildrenKeepInsertionOrder) {
  ContextTree tree;
  NodeId z = tree.child(kRootNode, S("z"));
  NodeId a = tree.child(kRootNode, S("a"));
  NodeId zChild = tree.child(z, S("inner"));
  NodeId m = tree.child(kRootNode, S("m"));
  tree.child(kRootNode, S("a"));  // existing: does not move
  EXPECT_EQ(children(tree, kRootNode), (std::vector<NodeId>{z, a, m}));
  EXPECT_EQ(children(tree, z), (std::vector<NodeId>{zChild}));
  EXPECT_EQ(tree.node(kRootNode).firstChild, z);
  EXPECT_EQ(tree.node(kRootNode).lastChild, m);
  EXPECT_EQ(tree.node(m).nextSibling, kNoNode);
  EXPECT_TRUE(children(tree, a).empty());
}

TEST(ContextTreeTest, ManyChildrenStayInOrderAndFindable) {
  ContextTree tree;
  std::vector<NodeId> made;
  for (int i = 0; i < 10000; ++i) made.push_back(tree.child(kRootNode, S("c" + std::to_string(i))));
  EXPECT_EQ(children(tree, kRootNode), made);
  for (int i = 0; i < 10000; ++i)
    ASSERT_EQ(tree.findChild(kRootNode, S("c" + std::to_string(i))), made[i]);
  EXPECT_EQ(tree.size(), 10001u);
}

TEST(ContextTreeTest, PathListsNamesBelowRoot) {
  ContextTree tree;
  NodeId a = tree.child(kRootNode, S("model"));
  NodeId b = tree.child(a, S("layer"));
  NodeId c = tree.child(b, S("attn"));
  EXPECT_EQ(tree.path(c), (std::vector<StringId>{S("model"), S("layer"), S("attn")}));
  EXPECT_EQ(tree.node(c).depth, 3u);
  EXPECT_EQ(tree.path(a), (std::vector<StringId>{S("model")}));
  EXPECT_TRUE(tree.path(kRootNode).empty());
  EXPECT_TRUE(tree.path(kNoNode).empty());
}

TEST(ContextTreeTest, DeepChainHasIncreasingDepth) {
  ContextTree tree;
  NodeId n = kRootNode;
  for (int i = 0; i < 5000; ++i) n = tree.child(n, S("d"));
  EXPECT_EQ(tree.node(n).depth, 5000u);
  EXPECT_EQ(tree.path(n).size(), 5000u);
  EXPECT_EQ(tree.size(), 5001u);
}

}  // namespace
}  // namespace proton
