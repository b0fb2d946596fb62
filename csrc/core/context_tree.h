// ContextTree: the calling-context tree of one session phase.
//
//   ContextTree tree;                                  // node 0 is ROOT
//   NodeId a = tree.child(kRootNode, strings.intern("forward"));
//   NodeId k = tree.child(a, strings.intern("gemm_kernel"));
//
// Nodes live in one contiguous vector; a child is found by (parent, name) in a FlatMap.
// Children keep their insertion order through first-child / next-sibling links, so writers
// walk the tree without building an index. Not thread-safe: the owning session serialises
// access.
#pragma once

#include <vector>

#include "core/flat_map.h"
#include "core/ids.h"

namespace proton {

struct ContextNode {
  NodeId parent = kNoNode;
  StringId name;
  NodeId firstChild = kNoNode;
  NodeId lastChild = kNoNode;
  NodeId nextSibling = kNoNode;
  uint32_t depth = 0;
};

class ContextTree {
 public:
  explicit ContextTree(StringId rootName = StringId{});

  // Returns the child of parent named name, creating it on first use.
  NodeId child(NodeId parent, StringId name);
  // Returns the child if it exists, kNoNode otherwise.
  NodeId findChild(NodeId parent, StringId name) const;

  const ContextNode &node(NodeId id) const { return nodes_[id.value]; }
  size_t size() const { return nodes_.size(); }

  // Names from the root's child down to id (the root itself excluded).
  std::vector<StringId> path(NodeId id) const;

 private:
  static uint64_t key(NodeId parent, StringId name) {
    return (uint64_t{parent.value} << 32) | name.value;
  }

  std::vector<ContextNode> nodes_;
  FlatMap children_;
};

}  // namespace proton
