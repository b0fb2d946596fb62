// What every libFuzzer target of the Hatchet readers checks on a tree the reader accepted:
// the TreeColumns invariants that bind_viewer.cc and the renderer index by without checks,
// then the tree rendered as proton-viewer would (time column, depth cut) and the text
// checked. A broken invariant aborts, which libFuzzer reports as a crash with the input.
//
//   TreeColumns tree;
//   if (readHatchetJson(data, &tree).isOk()) checkAndRender(tree, data.size() % 8);
//
// Single-threaded, like libFuzzer's driver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "viewer/tree_columns.h"
#include "viewer/tree_render.h"
#include "viewer/utf8.h"

namespace proton::fuzz {

#define PROTON_FUZZ_REQUIRE(cond)                                                 \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                        \
      std::abort();                                                               \
    }                                                                             \
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

}  // namespace proton::fuzz
