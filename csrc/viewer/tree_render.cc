#include "viewer/tree_render.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace proton::viewer {
namespace {

constexpr std::string_view kTee = "\u251c\u2500 ";    // ├─
constexpr std::string_view kElbow = "\u2514\u2500 ";  // └─
constexpr std::string_view kPipe = "\u2502  ";        // │
constexpr std::string_view kBlank = "   ";

void pad(size_t n, std::string *out) { out->append(n, ' '); }

}  // namespace

void appendValue(const CellValue &v, std::string *out) {
  char buf[64];
  int n;
  if (v.kind == CellValue::kNone) {
    out->push_back('-');
    return;
  }
  if (v.kind == CellValue::kInt) {
    n = std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.i));
  } else if (std::isnan(v.d)) {
    out->push_back('-');
    return;
  } else {
    double m = std::fabs(v.d);
    bool fixed = v.d == 0 || (1e-3 <= m && m < 1e9);
    if (std::isinf(v.d)) {
      n = std::snprintf(buf, sizeof buf, "%.3e", v.d);
    } else {
      // Correctly rounded like printf and Python's format(), several times faster.
      auto r = std::to_chars(buf, buf + sizeof buf, v.d,
                             fixed ? std::chars_format::fixed : std::chars_format::scientific, 3);
      n = static_cast<int>(r.ptr - buf);
    }
  }
  out->append(buf, n);
}

std::string renderTreeRows(const RenderRows &in) {
  size_t rows = in.order.size(), cols = in.columns.size();
  // Format every cell once; remember where each one is.
  std::string cells;
  std::vector<uint32_t> ends(rows * cols);
  std::vector<size_t> widths(in.titleLengths);
  cells.reserve(rows * cols * 8);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t before = cells.size();
      appendValue(in.columns[c][r], &cells);
      widths[c] = std::max(widths[c], cells.size() - before);
      ends[r * cols + c] = static_cast<uint32_t>(cells.size());
    }
  }
  // is_last: the last shown child of its parent.
  std::vector<uint8_t> isLast(in.parents.size()), seen(in.parents.size());
  for (size_t r = rows; r-- > 0;) {
    int32_t i = in.order[r], p = in.parents[i];
    if (p >= 0 && !seen[p]) seen[p] = isLast[i] = 1;
  }
  std::string out;
  out.reserve(cells.size() + rows * (2 * cols + 40));
  for (size_t c = 0; c < cols; ++c) {
    if (c) out += "  ";
    pad(widths[c] - in.titleLengths[c], &out);
    out += in.titles[c];
  }
  out += "  name";
  std::vector<std::string> stems{""};
  size_t start = 0;
  for (size_t r = 0; r < rows; ++r) {
    out.push_back('\n');
    for (size_t c = 0; c < cols; ++c) {
      size_t end = ends[r * cols + c];
      pad(widths[c] - (end - start), &out);
      out.append(cells, start, end - start);
      out += "  ";
      start = end;
    }
    int32_t i = in.order[r];
    int32_t d = in.depths[i];
    if (d > 0) {
      // stems[d - 1] is the parent's; keep it and replace what lay deeper.
      stems.resize(std::min<size_t>(stems.size(), d));
      if (stems.size() < static_cast<size_t>(d)) stems.resize(d);  // a parent not shown
      std::string stem = stems[d - 1];
      out += stem;
      out += isLast[i] ? kElbow : kTee;
      stem += isLast[i] ? kBlank : kPipe;
      stems.push_back(std::move(stem));
    }
    out += in.names[i];
  }
  return out;
}

}  // namespace proton::viewer
