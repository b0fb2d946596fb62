// The body of proton-viewer's tree report, built in one pass: a header of metric titles,
// then one line per shown node with its formatted values and its name behind box-drawing
// stems. Mirrors python/proton/viewer/render.py (the fallback) byte for byte.
//
//   RenderRows in{order, names, parents, depths, {{...}}, {"time/s"}, {6}};
//   std::string text = renderTreeRows(in);   // "  time/s  name\n  2.000  ROOT\n..."
//
// Pure function of its input; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace proton::viewer {

struct CellValue {
  enum Kind : uint8_t { kNone, kInt, kDouble };
  Kind kind = kNone;
  int64_t i = 0;
  double d = 0;
};

struct RenderRows {
  std::vector<int32_t> order;                   // shown nodes, ascending (pre-order)
  std::vector<std::string_view> names;          // per node, UTF-8
  std::vector<int32_t> parents;                 // per node
  std::vector<int32_t> depths;                  // per node, ROOT is 0
  std::vector<std::vector<CellValue>> columns;  // per column, one cell per shown node
  std::vector<std::string> titles;              // per column, UTF-8
  std::vector<size_t> titleLengths;             // per column, in characters
};

// Appends Python's rendering of one value: "-" for none or NaN, integers as they are,
// "%.3f" when 1e-3 <= |v| < 1e9 or v == 0, else "%.3e".
void appendValue(const CellValue &v, std::string *out);

// Header and rows joined by '\n', without a final newline.
std::string renderTreeRows(const RenderRows &in);

}  // namespace proton::viewer
