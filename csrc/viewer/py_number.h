// CellValue and Python's arithmetic on it: the viewer's C++ fast path computes metric
// columns with exactly the results (and types) Python's int and float operators give, so
// that its report is byte-identical to the Python renderer's.
//
//   CellValue a = CellValue::ofInt(7), b = CellValue::ofInt(2), q;
//   if (!trueDivide(a, b, &q)) { /* Python's answer could differ: let Python compute */ }
//   // q is the float 3.5, as 7 / 2 in Python
//
// An operation returns false where int64/double arithmetic might not give Python's answer
// (an integer overflowing int64, an integer division of operands beyond 2^53); the caller
// then falls back to Python. Plain value functions; thread-safe.
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

// Integers whose conversion to double is exact, so that int / int is one correctly rounded
// double division (CPython's fast path for true division).
inline bool fitsDouble(int64_t v) { return v >= -(int64_t{1} << 53) && v <= (int64_t{1} << 53); }

// Python's a + b, a - b, a * b (ints stay ints, a float makes a float): intOp is the
// overflow-checking builtin, doubleOp the float operation.
template <typename IntOp, typename DoubleOp>
bool arithmetic(CellValue a, CellValue b, CellValue *out, IntOp intOp, DoubleOp doubleOp) {
  if (a.kind == CellValue::kInt && b.kind == CellValue::kInt) {
    int64_t r;
    if (intOp(a.i, b.i, &r)) return false;
    *out = CellValue::ofInt(r);
    return true;
  }
  *out = CellValue::ofDouble(doubleOp(a.asDouble(), b.asDouble()));
  return true;
}
inline bool add(CellValue a, CellValue b, CellValue *out) {
  return arithmetic(
      a, b, out, [](int64_t x, int64_t y, int64_t *r) { return __builtin_add_overflow(x, y, r); },
      [](double x, double y) { return x + y; });
}
inline bool subtract(CellValue a, CellValue b, CellValue *out) {
  return arithmetic(
      a, b, out, [](int64_t x, int64_t y, int64_t *r) { return __builtin_sub_overflow(x, y, r); },
      [](double x, double y) { return x - y; });
}
inline bool multiply(CellValue a, CellValue b, CellValue *out) {
  return arithmetic(
      a, b, out, [](int64_t x, int64_t y, int64_t *r) { return __builtin_mul_overflow(x, y, r); },
      [](double x, double y) { return x * y; });
}
// Python's a / b for b != 0 (callers check Python's `if b` first).
inline bool trueDivide(CellValue a, CellValue b, CellValue *out) {
  if (a.kind == CellValue::kInt && b.kind == CellValue::kInt &&
      !(fitsDouble(a.i) && fitsDouble(b.i))) {
    return false;
  }
  *out = CellValue::ofDouble(a.asDouble() / b.asDouble());
  return true;
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
