// proton-viewer's text report, built in C++: a header of metric titles, one line per shown
// node with its formatted values and its name behind box-drawing stems (coloured by the
// first metric, with a legend, when asked), and the list of frames sorted by the first
// metric. The viewer's one renderer: proton-viewer's report and proton.viewer.render() both
// write their text here (render.py only chooses the names and appends the stats table).
//
//   TreeTable t{&parents, &depths, &nameIds, &names, {&timeColumn}, {"time/s"}, {6}};
//   TextSink out(1);
//   writeTreeLines(t, order, /*color=*/false, &out);   // "  time/s  name\n  2.000  ROOT\n..."
//
// Pure functions of their input; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "viewer/py_number.h"
#include "viewer/text_sink.h"

namespace proton::viewer {

struct TreeTable {
  const std::vector<int32_t> *parents = nullptr;         // per node
  const std::vector<int32_t> *depths = nullptr;          // per node, ROOT is 0
  const std::vector<uint32_t> *nameIds = nullptr;        // per node; null: node i is names[i]
  const std::vector<std::string_view> *names = nullptr;  // UTF-8
  std::vector<const std::vector<CellValue> *> columns;   // per column, one value per node
  std::vector<std::string> titles;                       // per column, UTF-8
  std::vector<size_t> titleLengths;                      // per column, in characters

  std::string_view name(int32_t node) const {
    return (*names)[nameIds != nullptr ? (*nameIds)[node] : static_cast<uint32_t>(node)];
  }
};

// Appends Python's rendering of one value: "-" for none or NaN, integers as they are,
// "%.3f" when 1e-3 <= |v| < 1e9 or v == 0, else "%.3e".
void appendValue(const CellValue &v, std::string *out);

// The header and a line per node of `order` (ascending, closed under taking parents),
// each ending in '\n'; with color, the first column in its legend band's colour and the
// legend after the tree.
void writeTreeLines(const TreeTable &table, const std::vector<int32_t> &order, bool color,
                    TextSink *out);

// --print-sorted: an empty line, "Sorted kernels by metric <title>" and the
// nodes of `order` but ROOT by the first column, largest first; each line ends in '\n'.
void writeSortedLines(const TreeTable &table, const std::vector<int32_t> &order, TextSink *out);

// The tree lines of writeTreeLines (no colour) with values given per shown node, joined by
// '\n' without a final newline (the form the Python renderer's fast path and the fuzz
// targets use).
struct RenderRows {
  std::vector<int32_t> order;                   // shown nodes, ascending (pre-order)
  std::vector<std::string_view> names;          // per node, UTF-8
  std::vector<int32_t> parents;                 // per node
  std::vector<int32_t> depths;                  // per node, ROOT is 0
  std::vector<std::vector<CellValue>> columns;  // per column, one cell per shown node
  std::vector<std::string> titles;              // per column, UTF-8
  std::vector<size_t> titleLengths;             // per column, in characters
};
std::string renderTreeRows(const RenderRows &in);

// The characters (code points) of a UTF-8 string.
size_t countCharacters(std::string_view utf8);

}  // namespace proton::viewer
