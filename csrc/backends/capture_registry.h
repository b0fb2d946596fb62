// CaptureRegistry: the context each CUDA-graph node was captured (or added) in, so that its
// kernels, replayed later, are filed under "<captured_at>" and that context, with the launch
// metadata evaluated at capture, in the sessions that recorded at capture.
//
//   registry.add(nodeId, context);                // BackendHost::captureContext()
//   registry.alias(execNodeId, nodeId);           // instantiation clones the node
//   registry.remove(execNodeId);                  // the graph was destroyed (retired)
//   std::shared_ptr<const CaptureContext> c = registry.find(execNodeId);   // still found
//   uint64_t mark = registry.retiredMark();       // before a flush that files every record
//   registry.forgetRetired(mark);                 // after it
//
// A destroyed node is retired, not forgotten: the records of its last replays usually arrive
// after the graph is gone (g.replay(); g.reset() returns before CUPTI delivers them). Retired
// nodes are forgotten once a flush has filed every record launched before, or, past
// kMaxRetired, oldest first. Memory is bounded: past kMaxNodes new nodes are not tracked
// (counted in graph_nodes_not_tracked); kernels of a node not found keep the launch context
// (counted by the attributor in graph_kernels_without_capture_context).
// Thread-safe (one mutex; used at graph capture and record processing, never per launch).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "core/capture_context.h"

namespace proton {

class CaptureRegistry {
 public:
  static constexpr size_t kMaxNodes = size_t(1) << 20;
  static constexpr size_t kMaxRetired = size_t(1) << 16;

  void add(uint64_t node, CaptureContext context);
  void alias(uint64_t clone, uint64_t original);
  void remove(uint64_t node);
  std::shared_ptr<const CaptureContext> find(uint64_t node) const;
  uint64_t retiredMark() const;
  void forgetRetired(uint64_t mark);  // nodes retired up to mark
  size_t size() const;                // nodes findable, retired ones included
  size_t retired() const;
  void clear();

 private:
  struct Entry {
    std::shared_ptr<const CaptureContext> context;
    uint64_t retiredAt = 0;  // 0: live; else its number in retired_
  };
  void put(uint64_t node, std::shared_ptr<const CaptureContext> context);  // mu_ held
  void forgetOldest();                                                     // mu_ held

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> nodes_;
  std::deque<std::pair<uint64_t, uint64_t>> retired_;  // (node, retiredAt), oldest first
  uint64_t lastRetired_ = 0;
};

}  // namespace proton
