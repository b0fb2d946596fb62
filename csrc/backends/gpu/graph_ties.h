// GraphTies: what a backend keeps per captured CUDA graph, and per executable graph made from
// it, as the vendor's callbacks tell them (CUPTI's GRAPH_CLONED, GRAPHEXEC_CREATED and their
// DESTROY_STARTING, and cuGraphExecUpdate's API callback): tensor metrics' capture slots,
// intra-kernel buffers' captured slots.
//
//   GraphTies<Captured> ties;
//   ties.add(graph, item);                         // captured into `graph`
//   ties.cloned(clone, graph); ties.execCreated(exec, graph); ties.execUpdated(exec, other);
//   if (const GraphTies<Captured>::List *items = ties.ofExec(exec)) ...;  // a graph launch
//
// Not thread-safe: its owner's lock guards it.
#pragma once

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/gpu/gpu_driver.h"

namespace proton::gpu {

template <class Item>
class GraphTies {
 public:
  using List = std::vector<std::shared_ptr<const Item>>;

  void add(Graph graph, std::shared_ptr<const Item> item) {
    byGraph_[graph].push_back(std::move(item));
  }
  void cloned(Graph clone, Graph original) {
    auto it = byGraph_.find(original);
    if (it != byGraph_.end()) byGraph_[clone] = it->second;
  }
  void destroyed(Graph graph) { byGraph_.erase(graph); }
  void execCreated(GraphExec exec, Graph graph) {
    auto it = byGraph_.find(graph);
    if (it != byGraph_.end()) byExec_[exec] = it->second;
  }
  // cuGraphExecUpdate: the executable's nodes now take their parameters (slot addresses
  // included) from `graph`, so it has that graph's items, or none.
  void execUpdated(GraphExec exec, Graph graph) {
    auto it = byGraph_.find(graph);
    if (it != byGraph_.end())
      byExec_[exec] = it->second;
    else
      byExec_.erase(exec);
  }
  void execDestroyed(GraphExec exec) { byExec_.erase(exec); }
  // The items of an executable graph; null if it has none.
  const List *ofExec(GraphExec exec) const {
    auto it = byExec_.find(exec);
    return it == byExec_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<Graph, List> byGraph_;
  std::unordered_map<GraphExec, List> byExec_;
};

}  // namespace proton::gpu
