// CellValue and the viewer's arithmetic on metric values: Python's int and float operators
// (ints stay ints, a float makes a float, int / int is a correctly rounded float) wherever
// int64 holds the integers, which is every profile Proton or Triton writes. Beyond int64
// the viewer computes in floats: an integer sum that overflows, or a value read beyond int64,
// becomes a float (Python's ints would grow). This is the one definition the viewer uses:
// proton-viewer's report, proton.viewer's Profile and derive() all compute through it.
//
//   CellValue q = trueDivide(CellValue::ofInt(7), CellValue::ofInt(2));   // the float 3.5
//   CellValue s = add(CellValue::ofInt(INT64_MAX), CellValue::ofInt(1));  // the float 2^63
//
// Plain value functions; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

namespace proton::viewer {

// None, a Python int that fits int64, or a Python float.
struct CellValue {
  enum Kind : uint8_t { kNone, kInt, kDouble };
  Kind kind = kNone;
  union {
    int64_t i = 0;
    double d;
  };

  static CellValue none() { return {}; }
  static CellValue ofInt(int64_t v) {
    CellValue c;
    c.kind = kInt;
    c.i = v;
    return c;
  }
  static CellValue ofDouble(double v) {
    CellValue c;
    c.kind = kDouble;
    c.d = v;
    return c;
  }
  bool isNone() const { return kind == kNone; }
  // Python's is_missing(): None or NaN.
  bool isMissing() const { return kind == kNone || (kind == kDouble && std::isnan(d)); }
  // Python's truth value of a number (NaN is true).
  bool isTrue() const { return kind == kInt ? i != 0 : kind == kDouble && d != 0; }
  double asDouble() const { return kind == kInt ? static_cast<double>(i) : d; }
};

// Python's a + b, a - b, a * b: intOp is the overflow-checking builtin (true on overflow,
// when the float operation gives the answer), doubleOp the float operation.
template <typename IntOp, typename DoubleOp>
CellValue arithmetic(CellValue a, CellValue b, IntOp intOp, DoubleOp doubleOp) {
  if (a.kind == CellValue::kInt && b.kind == CellValue::kInt) {
    int64_t r;
    if (!intOp(a.i, b.i, &r)) return CellValue::ofInt(r);
  }
  return CellValue::ofDouble(doubleOp(a.asDouble(), b.asDouble()));
}
inline CellValue add(CellValue a, CellValue b) {
  return arithmetic(
      a, b, [](int64_t x, int64_t y, int64_t *r) { return __builtin_add_overflow(x, y, r); },
      [](double x, double y) { return x + y; });
}
inline CellValue subtract(CellValue a, CellValue b) {
  return arithmetic(
      a, b, [](int64_t x, int64_t y, int64_t *r) { return __builtin_sub_overflow(x, y, r); },
      [](double x, double y) { return x - y; });
}
inline CellValue multiply(CellValue a, CellValue b) {
  return arithmetic(
      a, b, [](int64_t x, int64_t y, int64_t *r) { return __builtin_mul_overflow(x, y, r); },
      [](double x, double y) { return x * y; });
}
// Python's a / b for b != 0 (callers check `if b` first): a float. Integers beyond 2^53 are
// rounded to doubles first (Python divides them exactly; the quotients differ in the last
// bit at most).
inline CellValue trueDivide(CellValue a, CellValue b) {
  return CellValue::ofDouble(a.asDouble() / b.asDouble());
}

// Python's exact comparison of an int with a float: -1, 0 or 1; d must not be NaN.
inline int compareIntDouble(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  double whole = std::trunc(d);
  auto w = static_cast<int64_t>(whole);
  if (i != w) return i < w ? -1 : 1;
  double frac = d - whole;
  return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
}

// Python's a < b on two numbers (false when either is NaN).
inline bool lessThan(CellValue a, CellValue b) {
  if (a.kind == CellValue::kInt && b.kind == CellValue::kInt) return a.i < b.i;
  if (a.kind == CellValue::kDouble && b.kind == CellValue::kDouble) return a.d < b.d;
  if (a.kind == CellValue::kInt) return !std::isnan(b.d) && compareIntDouble(a.i, b.d) < 0;
  return !std::isnan(a.d) && compareIntDouble(b.i, a.d) > 0;
}

}  // namespace proton::viewer
