// Trees made out of trees, the viewer's one way of doing it: the union of several profiles
// by path (proton-viewer FILE FILE ..., --diff; proton.viewer.align), a profile with its
// Python frames shown shortened and folded (frames.py), and a profile restricted to some of
// its nodes (-i/-e, launch metadata hidden).
//
//   MergeInput a = pathsOf(treeA, nullptr), b = pathsOf(treeB, nullptr);
//   std::vector<std::vector<int32_t>> maps;
//   TreeColumns both = mergeTrees({&a, &b}, &maps);  // maps[k][i]: where input k's node i went
//
//   MergeInput shown = foldFrames(tree, &keep, labels, /*fold=*/true);  // labels per string
//   TreeColumns folded = mergeTrees({&shown}, nullptr);
//
// Merging: each node of an input goes, under a name, below the merged node of another node
// of the same input (its parent; for a folded frame, the parent of its run). Nodes that
// meet below one node with one name are one node; children come in first-seen order and the
// result in pre-order. Metrics of merged nodes: numbers add (py_number.h); of other values
// (strings, Python objects) the first one stays.
//
// Pure functions; thread-safe. A MergeInput views its tree's strings and its labels: they
// must outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "viewer/tree_columns.h"

namespace proton::viewer {

constexpr int32_t kLeftOut = -2;

struct MergeInput {
  const TreeColumns *tree = nullptr;
  // Per node: the node of this input below whose merged node it goes (-1 for ROOT, which
  // is the merged ROOT), or kLeftOut: neither the node nor its metrics are merged.
  std::vector<int32_t> under;
  std::vector<std::string_view> names;  // per node: its name in the merged tree
  std::deque<std::string> ownedNames;   // names made for the merge (folded runs)
  uint64_t otherOffset = 0;             // added to kOther values (the binding's object tables)
};

// Every node (with keep, every kept node; keep is closed under taking parents) below its
// parent, with its own name.
MergeInput pathsOf(const TreeColumns &tree, const std::vector<uint8_t> *keep);

// What frames.py says of one string of a tree: whether it is a Python frame's name
// (file:line@function), the name shown for that frame, and whether it is a library's.
struct FrameLabel {
  bool frame = false;
  bool library = false;
  std::string shown;
};

// The kept nodes with Python frames named as `labels` (per string id) say. With fold, each
// run of library frames, one calling the next, goes into its first frame: the run's frames
// are merged where the run is left, i.e. below the last frame of the run that has a child
// that is not a library frame, that has no child, or that has metrics of its own, named
// after the run's first frame plus " (+N)", N the frames it hides there. Other names (scopes,
// kernels, the program's frames) are never folded.
MergeInput foldFrames(const TreeColumns &tree, const std::vector<uint8_t> *keep,
                      const std::vector<FrameLabel> &labels, bool fold);

// The inputs merged (see above); maps, when not null, receives per input and node the
// merged node, -1 for the nodes left out. The merged ROOT is named as the first input's.
TreeColumns mergeTrees(const std::vector<const MergeInput *> &inputs,
                       std::vector<std::vector<int32_t>> *maps);

// The kept nodes alone, in their order, nothing merged (metadata and devices kept).
TreeColumns subsetTree(const TreeColumns &tree, const std::vector<uint8_t> &keep);

}  // namespace proton::viewer
