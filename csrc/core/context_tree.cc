#include "core/context_tree.h"

#include <algorithm>

#include "core/check.h"

namespace proton {

ContextTree::ContextTree(StringId rootName) {
  ContextNode root;
  root.name = rootName;
  nodes_.push_back(root);
}

NodeId ContextTree::findChild(NodeId parent, StringId name) const {
  const uint32_t *found = children_.find(key(parent, name));
  return found ? NodeId{*found} : kNoNode;
}

NodeId ContextTree::child(NodeId parent, StringId name) {
  PROTON_CHECK(parent.value < nodes_.size());
  uint64_t k = key(parent, name);
  if (const uint32_t *found = children_.find(k)) return NodeId{*found};
  PROTON_CHECK(nodes_.size() < kNoNode.value);
  NodeId id{static_cast<uint32_t>(nodes_.size())};
  ContextNode n;
  n.parent = parent;
  n.name = name;
  n.depth = nodes_[parent.value].depth + 1;
  nodes_.push_back(n);
  ContextNode &p = nodes_[parent.value];
  if (p.lastChild == kNoNode) {
    p.firstChild = id;
  } else {
    nodes_[p.lastChild.value].nextSibling = id;
  }
  p.lastChild = id;
  children_.insert(k, id.value);
  return id;
}

std::vector<StringId> ContextTree::path(NodeId id) const {
  std::vector<StringId> names;
  while (id != kRootNode && id != kNoNode) {
    names.push_back(nodes_[id.value].name);
    id = nodes_[id.value].parent;
  }
  std::reverse(names.begin(), names.end());
  return names;
}

}  // namespace proton
