// CaptureRegistry: the context each CUDA-graph node was captured (or added) in, so that its
// kernels, replayed later, are filed under "<captured_at>" and that context.
//
//   registry.add(nodeId, {strings.intern("model"), strings.intern("layer1")});
//   registry.alias(execNodeId, nodeId);           // instantiation clones the node
//   std::shared_ptr<const CaptureStack> s = registry.find(nodeId);
//
// Memory is bounded: removed nodes are forgotten, and past kMaxNodes new nodes are not
// tracked (counted in graph_nodes_not_tracked; their kernels keep the launch context).
// Thread-safe (one mutex; used at graph capture and record processing, never per launch).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/ids.h"

namespace proton {

using CaptureStack = std::vector<StringId>;  // scope names, outermost first

class CaptureRegistry {
 public:
  static constexpr size_t kMaxNodes = size_t(1) << 20;

  void add(uint64_t node, CaptureStack stack);
  void alias(uint64_t clone, uint64_t original);
  void remove(uint64_t node);
  std::shared_ptr<const CaptureStack> find(uint64_t node) const;
  size_t size() const;
  void clear();

 private:
  void put(uint64_t node, std::shared_ptr<const CaptureStack> stack);  // mu_ held

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<const CaptureStack>> nodes_;
};

}  // namespace proton
