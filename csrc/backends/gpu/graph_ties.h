// GraphTies: what a backend keeps per captured CUDA graph, and per executable graph made from
// it, as CUPTI's resource callbacks tell them (GRAPH_CLONED, GRAPHEXEC_CREATED and their
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

#include <cuda.h>

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

template <class Item>
class GraphTies {
 public:
  using List = std::vector<std::shared_ptr<const Item>>;

  void add(CUgraph graph, std::shared_ptr<const Item> item) {
    byGraph_[graph].push_back(std::move(item));
  }
  void cloned(CUgraph clone, CUgraph original) {
    auto it = byGraph_.find(original);
    if (it != byGraph_.end()) byGraph_[clone] = it->second;
  }
  void destroyed(CUgraph graph) { byGraph_.erase(graph); }
  void execCreated(CUgraphExec exec, CUgraph graph) {
    auto it = byGraph_.find(graph);
    if (it != byGraph_.end()) byExec_[exec] = it->second;
  }
  // cuGraphExecUpdate: the executable's nodes now take their parameters (slot addresses
  // included) from `graph`, so it has that graph's items, or none.
  void execUpdated(CUgraphExec exec, CUgraph graph) {
    auto it = byGraph_.find(graph);
    if (it != byGraph_.end())
      byExec_[exec] = it->second;
    else
      byExec_.erase(exec);
  }
  void execDestroyed(CUgraphExec exec) { byExec_.erase(exec); }
  // The items of an executable graph; null if it has none.
  const List *ofExec(CUgraphExec exec) const {
    auto it = byExec_.find(exec);
    return it == byExec_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<CUgraph, List> byGraph_;
  std::unordered_map<CUgraphExec, List> byExec_;
};

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
