#include "viewer/tree_render.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace proton::viewer {
namespace {

constexpr std::string_view kTee = "\u251c\u2500 ";    // ├─
constexpr std::string_view kElbow = "\u2514\u2500 ";  // └─
constexpr std::string_view kPipe = "\u2502  ";        // │
constexpr std::string_view kBlank = "   ";
constexpr std::string_view kReset = "\033[0m";
// The legend's bands (bottom, top) as fractions of the first column's range, high to low,
// and their colours (as hatchet's).
constexpr double kBandBottom[] = {0.9, 0.7, 0.5, 0.3, 0.1, 0.0};
constexpr double kBandTop[] = {1.0, 0.9, 0.7, 0.5, 0.3, 0.1};
constexpr std::string_view kBandColor[] = {"\033[38;5;196m", "\033[38;5;208m", "\033[38;5;220m",
                                           "\033[38;5;118m", "\033[38;5;40m",  "\033[38;5;28m"};
constexpr int kBands = 6;
constexpr size_t kSortedNameWidth = 105;
constexpr size_t kSortedNameLimit = 100;

// "%.3f" of 0 < |v| < 1e9 with integer arithmetic; false near a rounding tie, where only
// the exact decimal expansion (std::to_chars) can tell.
bool formatFixedFast(double v, char *buf, int *length) {
  double a = std::fabs(v) * 1000.0;  // < 1e12: the error of the product is below 1.2e-4
  double whole = std::floor(a);
  double frac = a - whole;
  if (std::fabs(frac - 0.5) < 1e-3) return false;
  auto r = static_cast<uint64_t>(whole) + (frac > 0.5 ? 1 : 0);
  char *p = buf;
  if (v < 0) *p++ = '-';
  p = std::to_chars(p, buf + 40, r / 1000).ptr;
  unsigned f = static_cast<unsigned>(r % 1000);
  p[0] = '.';
  p[1] = static_cast<char>('0' + f / 100);
  p[2] = static_cast<char>('0' + f / 10 % 10);
  p[3] = static_cast<char>('0' + f % 10);
  *length = static_cast<int>(p + 4 - buf);
  return true;
}

// A value as the viewer shows it (appendValue's rule) into buf (48 bytes); returns the length.
int formatValue(const CellValue &v, char *buf) {
  if (v.kind == CellValue::kNone) return buf[0] = '-', 1;
  if (v.kind == CellValue::kInt)
    return static_cast<int>(std::to_chars(buf, buf + 48, v.i).ptr - buf);
  double d = v.d;
  if (std::isnan(d)) return buf[0] = '-', 1;
  if (std::isinf(d)) {
    std::memcpy(buf, d < 0 ? "-inf" : "inf", d < 0 ? 4 : 3);
    return d < 0 ? 4 : 3;
  }
  double m = std::fabs(d);
  bool fixed = d == 0 || (1e-3 <= m && m < 1e9);
  int n;
  if (fixed && d != 0 && formatFixedFast(d, buf, &n)) return n;
  // Correctly rounded like printf and Python's format().
  auto r = std::to_chars(buf, buf + 48, d,
                         fixed ? std::chars_format::fixed : std::chars_format::scientific, 3);
  return static_cast<int>(r.ptr - buf);
}

// The colour bands of the first column and the legend lines.
struct Colors {
  std::vector<int8_t> bands;  // per row, -1: uncoloured
  std::vector<std::string> legend;
};

bool spanAtMostZero(const CellValue &span) {
  return span.kind == CellValue::kInt ? span.i <= 0 : span.d <= 0;
}

int8_t bandOf(const CellValue &value, const CellValue &low, const CellValue &span) {
  if (value.isMissing() || spanAtMostZero(span))
    return spanAtMostZero(span) && !value.isNone() ? 0 : -1;
  CellValue fraction = trueDivide(subtract(value, low), span);
  for (int k = 0; k < kBands; ++k) {
    if (fraction.d >= kBandBottom[k]) return static_cast<int8_t>(k);
  }
  return kBands - 1;
}

void computeColors(const TreeTable &table, const std::vector<int32_t> &order, Colors *out) {
  const std::vector<CellValue> &first = *table.columns[0];
  CellValue low = CellValue::ofInt(0), high = CellValue::ofInt(0);
  bool any = false;
  for (int32_t i : order) {  // min() and max() keep the first of equal values
    const CellValue &v = first[i];
    if (v.isMissing()) continue;
    if (!any) {
      low = high = v;
      any = true;
    }
    if (lessThan(v, low)) low = v;
    if (lessThan(high, v)) high = v;
  }
  CellValue span = subtract(high, low);
  out->bands.resize(order.size());
  for (size_t r = 0; r < order.size(); ++r) out->bands[r] = bandOf(first[order[r]], low, span);
  std::string line = "Legend (" + table.titles[0] + ": min ";
  appendValue(low, &line);
  line += ", max ";
  appendValue(high, &line);
  line += ")";
  out->legend = {"", line};
  for (int k = 0; k < kBands; ++k) {
    double lo = low.asDouble() + kBandBottom[k] * span.asDouble();
    double hi = low.asDouble() + kBandTop[k] * span.asDouble();
    line.assign(kBandColor[k]);
    line += "\u2588";
    line += kReset;
    line += ' ';
    appendValue(CellValue::ofDouble(lo), &line);
    line += " - ";
    appendValue(CellValue::ofDouble(hi), &line);
    out->legend.push_back(line);
  }
}

}  // namespace

void appendValue(const CellValue &v, std::string *out) {
  char buf[48];
  out->append(buf, formatValue(v, buf));
}

size_t countCharacters(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

void writeTreeLines(const TreeTable &table, const std::vector<int32_t> &order, bool color,
                    TextSink *out) {
  size_t rows = order.size(), cols = table.columns.size();
  Colors colors;
  if (color && cols > 0) computeColors(table, order, &colors);
  // Format every cell once; remember where each one ends.
  std::string cells;
  std::vector<uint8_t> lengths(rows * cols);  // a value is at most 48 characters
  std::vector<size_t> widths(table.titleLengths);
  cells.reserve(rows * cols * 8);
  char buf[48];
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      int n = formatValue((*table.columns[c])[order[r]], buf);
      cells.append(buf, n);
      widths[c] = std::max(widths[c], static_cast<size_t>(n));
      lengths[r * cols + c] = static_cast<uint8_t>(n);
    }
  }
  const std::vector<int32_t> &parents = *table.parents;
  // isLast: the last shown child of its parent.
  std::vector<uint8_t> isLast(parents.size()), seen(parents.size());
  for (size_t r = rows; r-- > 0;) {
    int32_t i = order[r], p = parents[i];
    if (p >= 0 && !seen[p]) seen[p] = isLast[i] = 1;
  }
  for (size_t c = 0; c < cols; ++c) {
    if (c) out->append("  ");
    out->append(widths[c] - table.titleLengths[c], ' ');
    out->append(table.titles[c]);
  }
  out->append("  name\n");
  // stemEnds[d - 1]: the length of `stem` that a node at depth d writes before its glyph.
  std::string stem;
  std::vector<size_t> stemEnds{0};
  size_t start = 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t length = lengths[r * cols + c];
      bool band = c == 0 && color && colors.bands[r] >= 0;
      if (band) out->append(kBandColor[colors.bands[r]]);
      out->append(widths[c] - length, ' ');
      out->append(std::string_view(cells).substr(start, length));
      if (band) out->append(kReset);
      out->append("  ");
      start += length;
    }
    int32_t i = order[r];
    auto d = static_cast<size_t>((*table.depths)[i]);
    if (d > 0) {
      // A parent is always shown before its children, so stemEnds has d entries or more.
      stemEnds.resize(std::max<size_t>(std::min(stemEnds.size(), d), 1));
      while (stemEnds.size() < d) stemEnds.push_back(stemEnds.back());
      stem.resize(stemEnds[d - 1]);
      out->append(stem);
      out->append(isLast[i] ? kElbow : kTee);
      stem += isLast[i] ? kBlank : kPipe;
      stemEnds.push_back(stem.size());
    }
    out->append(table.name(i));
    out->push('\n');
  }
  for (const std::string &line : colors.legend) {
    out->append(line);
    out->push('\n');
  }
}

void writeSortedLines(const TreeTable &table, const std::vector<int32_t> &order, TextSink *out) {
  const std::vector<CellValue> &values = *table.columns[0];
  std::vector<int32_t> nodes;
  nodes.reserve(order.size());
  for (int32_t i : order) {
    if (i != 0) nodes.push_back(i);
  }
  // Present values first, largest first, ties in tree order (a stable sort).
  std::stable_sort(nodes.begin(), nodes.end(), [&](int32_t a, int32_t b) {
    bool missingA = values[a].isMissing(), missingB = values[b].isMissing();
    if (missingA || missingB) return !missingA && missingB;
    return lessThan(values[b], values[a]);
  });
  out->append("\nSorted kernels by metric ");
  out->append(table.titles[0]);
  out->push('\n');
  char buf[48];
  for (int32_t i : nodes) {
    std::string_view name = table.name(i);
    size_t characters = countCharacters(name);
    if (characters > kSortedNameLimit) {
      size_t bytes = 0;
      for (size_t k = 0; k < kSortedNameLimit; ++bytes) {
        k += (static_cast<unsigned char>(name[bytes]) & 0xC0) != 0x80;
      }
      while (bytes < name.size() && (static_cast<unsigned char>(name[bytes]) & 0xC0) == 0x80) {
        ++bytes;
      }
      out->append(name.substr(0, bytes));
      out->append("...");
      characters = kSortedNameLimit + 3;
    } else {
      out->append(name);
    }
    if (characters < kSortedNameWidth) out->append(kSortedNameWidth - characters, ' ');
    out->push(' ');
    out->append(std::string_view(buf, formatValue(values[i], buf)));
    out->push('\n');
  }
}

std::string renderTreeRows(const RenderRows &in) {
  TreeTable table{&in.parents, &in.depths, nullptr, &in.names, {}, in.titles, in.titleLengths};
  std::vector<std::vector<CellValue>> perNode(in.columns.size());
  for (size_t c = 0; c < in.columns.size(); ++c) {
    perNode[c].resize(in.parents.size());
    for (size_t r = 0; r < in.order.size(); ++r) perNode[c][in.order[r]] = in.columns[c][r];
    table.columns.push_back(&perNode[c]);
  }
  std::string text;
  {
    TextSink sink(&text);
    writeTreeLines(table, in.order, /*color=*/false, &sink);
  }
  if (!text.empty()) text.pop_back();
  return text;
}

}  // namespace proton::viewer
