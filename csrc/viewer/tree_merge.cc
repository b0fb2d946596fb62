#include "viewer/tree_merge.h"

#include <cstring>
#include <unordered_map>

#include "viewer/py_number.h"

namespace proton::viewer {
namespace {

bool hasMetrics(const TreeColumns &tree, size_t i) {
  for (const MetricColumn &m : tree.metrics) {
    if (m.kinds[i] != ValueKind::kAbsent) return true;
  }
  return false;
}

CellValue numberAt(ValueKind kind, uint64_t bits) {
  if (kind == ValueKind::kInt) {
    int64_t v;
    std::memcpy(&v, &bits, 8);
    return CellValue::ofInt(v);
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return CellValue::ofDouble(d);
}

bool isNumber(ValueKind kind) { return kind == ValueKind::kInt || kind == ValueKind::kDouble; }

// The union's nodes in creation order, children linked in first-seen order.
struct Union {
  std::vector<int32_t> parent{-1};
  std::vector<uint32_t> name{0};
  std::vector<int32_t> firstChild{-1}, lastChild{-1}, nextSibling{-1};
  std::unordered_map<uint64_t, int32_t> index;  // (parent << 32 | name) -> node

  int32_t child(int32_t p, uint32_t n) {
    auto [it, added] =
        index.try_emplace((static_cast<uint64_t>(p) << 32) | n, static_cast<int32_t>(size()));
    if (!added) return it->second;
    int32_t u = it->second;
    parent.push_back(p);
    name.push_back(n);
    firstChild.push_back(-1);
    lastChild.push_back(-1);
    nextSibling.push_back(-1);
    (lastChild[p] < 0 ? firstChild[p] : nextSibling[lastChild[p]]) = u;
    lastChild[p] = u;
    return u;
  }
  size_t size() const { return parent.size(); }

  // newIndex[u]: u's place in pre-order.
  std::vector<int32_t> preorder() const {
    std::vector<int32_t> newIndex(size()), stack{0}, kids;
    int32_t next = 0;
    while (!stack.empty()) {
      int32_t u = stack.back();
      stack.pop_back();
      newIndex[u] = next++;
      kids.clear();
      for (int32_t c = firstChild[u]; c >= 0; c = nextSibling[c]) kids.push_back(c);
      stack.insert(stack.end(), kids.rbegin(), kids.rend());
    }
    return newIndex;
  }
};

}  // namespace

MergeInput pathsOf(const TreeColumns &tree, const std::vector<uint8_t> *keep) {
  MergeInput in;
  in.tree = &tree;
  size_t n = tree.size();
  in.under.resize(n);
  in.names.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bool kept = i == 0 || keep == nullptr || (*keep)[i];
    in.under[i] = kept ? tree.parents[i] : kLeftOut;
    in.names[i] = tree.strings[tree.nameIds[i]];
  }
  return in;
}

MergeInput foldFrames(const TreeColumns &tree, const std::vector<uint8_t> *keep,
                      const std::vector<FrameLabel> &labels, bool fold) {
  MergeInput in = pathsOf(tree, keep);
  size_t n = tree.size();
  auto labelOf = [&](size_t i) -> const FrameLabel * {
    uint32_t id = tree.nameIds[i];
    return id < labels.size() && labels[id].frame ? &labels[id] : nullptr;
  };
  std::vector<uint8_t> library(n), hasChildren(n), hasOtherChild(n);
  for (size_t i = 1; i < n; ++i) {
    if (in.under[i] == kLeftOut) continue;
    const FrameLabel *label = labelOf(i);
    library[i] = fold && label != nullptr && label->library;
    int32_t p = tree.parents[i];
    hasChildren[p] = 1;
    if (!library[i]) hasOtherChild[p] = 1;
  }
  std::vector<int32_t> head(n, -1), hidden(n, 0);
  for (size_t i = 1; i < n; ++i) {
    if (in.under[i] == kLeftOut) continue;
    if (!library[i]) {
      if (const FrameLabel *label = labelOf(i)) in.names[i] = label->shown;
      continue;
    }
    int32_t p = tree.parents[i];
    head[i] = library[p] ? head[p] : static_cast<int32_t>(i);
    hidden[i] = library[p] ? hidden[p] + 1 : 0;
    if (!hasOtherChild[i] && hasChildren[i] && !hasMetrics(tree, i)) {
      in.under[i] = kLeftOut;  // inside the run: shown where the run is left
      continue;
    }
    in.under[i] = tree.parents[head[i]];
    const std::string &first = labelOf(head[i])->shown;
    if (hidden[i] == 0) {
      in.names[i] = first;
    } else {
      in.names[i] = in.ownedNames.emplace_back(first + " (+" + std::to_string(hidden[i]) + ")");
    }
  }
  return in;
}

TreeColumns mergeTrees(const std::vector<const MergeInput *> &inputs,
                       std::vector<std::vector<int32_t>> *maps) {
  TreeColumns out;
  StringInterner strings(&out.strings);
  Union u;
  std::vector<std::vector<int32_t>> raw(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const MergeInput &in = *inputs[k];
    size_t n = in.tree->size();
    raw[k].assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      int32_t under = in.under[i];
      if (under == kLeftOut) continue;
      uint32_t name = strings.intern(in.names[i]);
      if (under < 0) {  // ROOT
        if (k == 0) u.name[0] = name;
        raw[k][i] = 0;
      } else if (raw[k][under] >= 0) {
        raw[k][i] = u.child(raw[k][under], name);
      }
    }
  }
  if (inputs.empty()) u.name[0] = strings.intern("ROOT");
  std::vector<int32_t> newIndex = u.preorder();
  size_t size = u.size();
  out.parents.resize(size);
  out.nameIds.resize(size);
  for (size_t v = 0; v < size; ++v) {
    int32_t at = newIndex[v];
    out.parents[at] = u.parent[v] < 0 ? -1 : newIndex[u.parent[v]];
    out.nameIds[at] = u.name[v];
  }
  // Metrics, columns in first-seen order (inputs in order, each in its column order).
  std::unordered_map<std::string, int> columnOf;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const MergeInput &in = *inputs[k];
    for (const MetricColumn &m : in.tree->metrics) {
      auto [it, added] = columnOf.try_emplace(m.name, static_cast<int>(out.metrics.size()));
      if (added) {
        out.metrics.push_back({m.name, std::vector<ValueKind>(size, ValueKind::kAbsent),
                               std::vector<uint64_t>(size, 0)});
      }
      MetricColumn &to = out.metrics[it->second];
      for (size_t i = 0; i < m.kinds.size(); ++i) {
        ValueKind kind = m.kinds[i];
        if (kind == ValueKind::kAbsent || raw[k][i] < 0) continue;
        int32_t at = newIndex[raw[k][i]];
        ValueKind &have = to.kinds[at];
        uint64_t bits = m.values[i];
        if (have == ValueKind::kAbsent) {
          have = kind;
          if (kind == ValueKind::kString) bits = strings.intern(in.tree->strings[bits]);
          if (kind == ValueKind::kOther) bits += in.otherOffset;
          to.values[at] = bits;
        } else if (isNumber(have) && isNumber(kind)) {
          CellValue sum = add(numberAt(have, to.values[at]), numberAt(kind, bits));
          have = sum.kind == CellValue::kInt ? ValueKind::kInt : ValueKind::kDouble;
          if (sum.kind == CellValue::kInt) {
            std::memcpy(&to.values[at], &sum.i, 8);
          } else {
            std::memcpy(&to.values[at], &sum.d, 8);
          }
        }
      }
    }
  }
  if (maps != nullptr) {
    maps->assign(inputs.size(), {});
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto &map = (*maps)[k];
      map.resize(raw[k].size());
      for (size_t i = 0; i < raw[k].size(); ++i) map[i] = raw[k][i] < 0 ? -1 : newIndex[raw[k][i]];
    }
  }
  return out;
}

TreeColumns subsetTree(const TreeColumns &tree, const std::vector<uint8_t> &keep) {
  TreeColumns out;
  out.strings = tree.strings;
  out.metadata = tree.metadata;
  out.devices = tree.devices;
  size_t n = tree.size();
  std::vector<int32_t> remap(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (i != 0 && !keep[i]) continue;
    remap[i] = static_cast<int32_t>(out.parents.size());
    int32_t p = tree.parents[i];
    out.parents.push_back(p < 0 ? -1 : remap[p]);
    out.nameIds.push_back(tree.nameIds[i]);
  }
  for (const MetricColumn &m : tree.metrics) {
    MetricColumn &to = out.metrics.emplace_back();
    to.name = m.name;
    to.kinds.reserve(out.size());
    to.values.reserve(out.size());
    for (size_t i = 0; i < n; ++i) {
      if (remap[i] < 0) continue;
      to.kinds.push_back(m.kinds[i]);
      to.values.push_back(m.values[i]);
    }
  }
  return out;
}

}  // namespace proton::viewer
