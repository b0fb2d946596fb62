// What every libFuzzer target of the Hatchet readers checks on a tree the reader accepted:
// the TreeColumns invariants that bind_viewer.cc and the renderer index by without checks,
// the tree rendered (renderTreeRows, the Python renderer's fast path) and proton-viewer's
// whole C++ report (tree_view.h: hiding, -i/-e, derived columns, -t/-d, colour, sorted
// list) with options drawn from the input, and the kept frames folded (tree_merge.h) with
// their totals unchanged. A broken invariant aborts, which libFuzzer
// reports as a crash with the input; so do ASan and UBSan.
//
//   TreeColumns tree;
//   if (readHatchetJson(data, &tree).isOk()) checkTree(tree, knobsFrom(data, size));
//
// Single-threaded, like libFuzzer's driver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "viewer/text_sink.h"
#include "viewer/tree_columns.h"
#include "viewer/tree_merge.h"
#include "viewer/tree_render.h"
#include "viewer/tree_view.h"
#include "viewer/utf8.h"

namespace proton::fuzz {

#define PROTON_FUZZ_REQUIRE(cond)                                                              \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

inline bool validUtf8(std::string_view s) {
  return viewer::validUtf8(s.data(), s.data() + s.size());
}

// Characters in a valid UTF-8 string (what Python's len() gives).
inline size_t utf8Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline void checkColumns(const viewer::TreeColumns &tree) {
  using viewer::ValueKind;
  size_t n = tree.size();
  PROTON_FUZZ_REQUIRE(n >= 1);
  PROTON_FUZZ_REQUIRE(tree.nameIds.size() == n);
  PROTON_FUZZ_REQUIRE(tree.parents[0] == -1);
  for (size_t i = 1; i < n; ++i) {
    PROTON_FUZZ_REQUIRE(tree.parents[i] >= 0 && static_cast<size_t>(tree.parents[i]) < i);
  }
  for (uint32_t id : tree.nameIds) PROTON_FUZZ_REQUIRE(id < tree.strings.size());
  for (const std::string &s : tree.strings) PROTON_FUZZ_REQUIRE(validUtf8(s));
  for (size_t k = 0; k < tree.metrics.size(); ++k) {
    const viewer::MetricColumn &m = tree.metrics[k];
    PROTON_FUZZ_REQUIRE(validUtf8(m.name));
    for (size_t j = 0; j < k; ++j) PROTON_FUZZ_REQUIRE(tree.metrics[j].name != m.name);
    PROTON_FUZZ_REQUIRE(m.kinds.size() == n && m.values.size() == n);
    for (size_t i = 0; i < n; ++i) {
      switch (m.kinds[i]) {
        case ValueKind::kAbsent:
          PROTON_FUZZ_REQUIRE(m.values[i] == 0);
          break;
        case ValueKind::kString:
          PROTON_FUZZ_REQUIRE(m.values[i] < tree.strings.size());
          break;
        case ValueKind::kInt:
        case ValueKind::kDouble:
          break;
        default:
          PROTON_FUZZ_REQUIRE(!"unknown value kind");
      }
    }
  }
}

inline size_t countNewlines(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

inline viewer::CellValue cellOf(const viewer::MetricColumn &m, size_t i) {
  viewer::CellValue cell;
  if (m.kinds[i] == viewer::ValueKind::kInt) {
    cell.kind = viewer::CellValue::kInt;
    std::memcpy(&cell.i, &m.values[i], 8);
  } else if (m.kinds[i] == viewer::ValueKind::kDouble) {
    cell.kind = viewer::CellValue::kDouble;
    std::memcpy(&cell.d, &m.values[i], 8);
  }
  return cell;
}

// Renders the nodes less than maxDepth levels below ROOT (ROOT always), one column per
// metric (strings show as "-"), and checks the text: valid UTF-8, a header line and one
// line per shown node, ending in the last shown node's name.
inline void checkAndRender(const viewer::TreeColumns &tree, int maxDepth) {
  checkColumns(tree);
  size_t n = tree.size();
  viewer::RenderRows in;
  in.parents = tree.parents;
  in.depths.assign(n, 0);
  in.names.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) in.depths[i] = in.depths[tree.parents[i]] + 1;
    in.names[i] = tree.strings[tree.nameIds[i]];
    if (i == 0 || in.depths[i] < maxDepth) in.order.push_back(static_cast<int32_t>(i));
  }
  for (const viewer::MetricColumn &m : tree.metrics) {
    auto &cells = in.columns.emplace_back();
    for (int32_t i : in.order) cells.push_back(cellOf(m, i));
    in.titles.push_back(m.name);
    in.titleLengths.push_back(utf8Length(m.name));
  }
  std::string text = viewer::renderTreeRows(in);
  PROTON_FUZZ_REQUIRE(validUtf8(text));
  // One header line and one line per shown node, plus the newlines inside titles and names.
  size_t newlines = in.order.size();
  for (const std::string &t : in.titles) newlines += countNewlines(t);
  for (int32_t i : in.order) newlines += countNewlines(in.names[i]);
  PROTON_FUZZ_REQUIRE(countNewlines(text) == newlines);
  std::string_view last = in.names[in.order.back()];
  PROTON_FUZZ_REQUIRE(std::string_view(text).substr(text.size() - last.size()) == last);
}

// Options for checkReport from the input's first and last bytes and its size, so that the
// fuzzer explores them along with the file.
inline uint32_t knobsFrom(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  return data[size - 1] | uint32_t{data[0]} << 8 | static_cast<uint32_t>(size) << 16;
}

// Nodes in ascending order, each kept, with its parent listed before it (ROOT first).
inline void checkShown(const viewer::TreeColumns &tree, const std::vector<uint8_t> &keep,
                       const std::vector<int32_t> &order) {
  PROTON_FUZZ_REQUIRE(!order.empty() && order[0] == 0);
  std::vector<uint8_t> shown(tree.size());
  for (size_t r = 0; r < order.size(); ++r) {
    int32_t i = order[r];
    PROTON_FUZZ_REQUIRE(i >= 0 && static_cast<size_t>(i) < tree.size() && keep[i]);
    PROTON_FUZZ_REQUIRE(r == 0 || (order[r - 1] < i && shown[tree.parents[i]]));
    shown[i] = 1;
  }
}

// proton-viewer's C++ report of the tree as fast_report.show drives it: launch metadata
// hidden, -i/-e masks over the strings, every column recipe on the numeric metrics, the
// shown nodes for -t/-d, then the tree (coloured or not) and the sorted list as text.
inline void checkReport(const viewer::TreeColumns &tree, uint32_t knobs) {
  using namespace viewer;
  size_t n = tree.size();
  std::vector<uint8_t> include(tree.strings.size()), exclude(tree.strings.size());
  for (size_t s = 0; s < tree.strings.size(); ++s) {
    include[s] = (s + (knobs >> 8)) % 3 == 0;
    exclude[s] = (s + (knobs >> 12)) % 7 == 0;
  }
  std::vector<uint8_t> keep = selectNodes(
      tree,
      {"__proton_launch_metadata", knobs & 1 ? &include : nullptr, knobs & 2 ? &exclude : nullptr});
  PROTON_FUZZ_REQUIRE(keep.size() == n && keep[0]);
  for (size_t i = 1; i < n; ++i) PROTON_FUZZ_REQUIRE(!keep[i] || keep[tree.parents[i]]);

  std::vector<int> numbers;
  for (const MetricKind &k : keptMetricKinds(tree, keep)) {
    PROTON_FUZZ_REQUIRE(k.column >= 0 && static_cast<size_t>(k.column) < tree.metrics.size());
    if (k.number) numbers.push_back(k.column);
  }
  std::vector<uint8_t> exclusive(tree.metrics.size());
  for (size_t c = 0; c < exclusive.size(); ++c) exclusive[c] = (knobs >> (c % 8)) & 4;
  ColumnEvaluator eval(tree, keep, exclusive);
  std::vector<std::vector<CellValue>> columns;
  std::vector<std::string> titles;
  const ColumnOp ops[] = {ColumnOp::kInclusive, ColumnOp::kOwn,  ColumnOp::kScaled,
                          ColumnOp::kAverage,   ColumnOp::kRate, ColumnOp::kPercent};
  const int64_t divisors[] = {1, 1000000000, 1000000000000};
  for (size_t k = 0; k < numbers.size() && k < 3; ++k) {
    for (ColumnOp op : ops) {
      ColumnRecipe recipe{op, numbers[k], numbers[(k + 1) % numbers.size()],
                          static_cast<int>((knobs >> 16) % 19) - 9, divisors[k % 3]};
      std::vector<CellValue> out;
      eval.evaluate(recipe, &out);
      PROTON_FUZZ_REQUIRE(out.size() == n);
      columns.push_back(std::move(out));
      titles.push_back(tree.metrics[numbers[k]].name);
    }
  }
  if (columns.empty()) {  // a profile without metrics: names only, as the report does
    columns.emplace_back(n);
    titles.emplace_back();
  }

  std::vector<int32_t> depths = nodeDepths(tree.parents);
  PROTON_FUZZ_REQUIRE(depths.size() == n);
  std::optional<double> threshold;
  if (knobs & 8) threshold = static_cast<double>(static_cast<int8_t>(knobs >> 16));
  std::optional<int64_t> depth;
  if (knobs & 16) depth = (knobs >> 20) % 6;
  std::vector<int32_t> order =
      visibleNodes(tree.parents, depths, keep, columns[0], threshold, depth);
  checkShown(tree, keep, order);

  std::vector<std::string_view> strings(tree.strings.begin(), tree.strings.end());
  TreeTable table{&tree.parents, &depths, &tree.nameIds, &strings, {}, titles, {}};
  for (size_t c = 0; c < columns.size(); ++c) {
    table.columns.push_back(&columns[c]);
    table.titleLengths.push_back(countCharacters(titles[c]));
  }
  std::string text;
  {
    TextSink sink(&text);
    writeTreeLines(table, order, (knobs & 32) != 0, &sink);
    writeSortedLines(table, order, &sink);
    PROTON_FUZZ_REQUIRE(sink.flush().isOk());
  }
  PROTON_FUZZ_REQUIRE(validUtf8(text));
}

// The kept nodes folded (names containing '@' taken for frames, some of them a library's):
// a tree in pre-order whose integer metrics add up to the kept nodes' totals.
inline void checkFold(const viewer::TreeColumns &tree, const std::vector<uint8_t> &keep,
                      uint32_t knobs) {
  using namespace viewer;
  std::vector<FrameLabel> labels(tree.strings.size());
  for (size_t s = 0; s < tree.strings.size(); ++s) {
    const std::string &name = tree.strings[s];
    if (name.find('@') == std::string::npos) continue;
    labels[s] = {true, ((s + knobs) & 1) != 0, name.substr(0, name.size() / 2)};
  }
  MergeInput plan = foldFrames(tree, &keep, labels, (knobs & 64) != 0);
  TreeColumns folded = mergeTrees({&plan}, nullptr);
  PROTON_FUZZ_REQUIRE(folded.size() >= 1 && folded.parents[0] == -1);
  for (size_t i = 1; i < folded.size(); ++i) {
    PROTON_FUZZ_REQUIRE(folded.parents[i] >= 0 && static_cast<size_t>(folded.parents[i]) < i);
  }
  for (const MetricColumn &m : tree.metrics) {
    __int128 before = 0, after = 0;
    for (size_t i = 0; i < tree.size(); ++i) {
      int64_t v;
      std::memcpy(&v, &m.values[i], 8);
      if (keep[i] && m.kinds[i] == ValueKind::kInt) before += v;
    }
    for (const MetricColumn &f : folded.metrics) {
      if (f.name != m.name) continue;
      bool floats = false;
      for (size_t i = 0; i < folded.size(); ++i) {
        int64_t v;
        std::memcpy(&v, &f.values[i], 8);
        if (f.kinds[i] == ValueKind::kInt) after += v;
        floats |= f.kinds[i] == ValueKind::kDouble;
      }
      if (!floats) PROTON_FUZZ_REQUIRE(before == after);  // else a sum became a float
    }
  }
}

// Everything above on one accepted tree.
inline void checkTree(const viewer::TreeColumns &tree, uint32_t knobs) {
  checkAndRender(tree, 1 + (knobs & 0xFF) % 8);
  checkReport(tree, knobs);
  std::vector<uint8_t> keep =
      viewer::selectNodes(tree, {"__proton_launch_metadata", nullptr, nullptr});
  checkFold(tree, keep, knobs);
}

}  // namespace proton::fuzz
