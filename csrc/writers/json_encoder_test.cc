#include "writers/json_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace proton {
namespace {

template <typename F>
std::string encode(F &&f) {
  StringSink sink;
  JsonEncoder e(sink);
  f(e);
  return sink.out;
}

std::string floating(double v) {
  return encode([&](JsonEncoder &e) { e.floating(v); });
}
std::string quoted(std::string_view s) {
  return encode([&](JsonEncoder &e) { e.string(s); });
}

TEST(JsonEncoderTest, FloatAlwaysHasAPointOrExponent) {
  EXPECT_EQ(floating(1.0), "1.0");
  EXPECT_EQ(floating(0.0), "0.0");
  EXPECT_EQ(floating(-0.0), "-0.0");
  EXPECT_EQ(floating(-3.0), "-3.0");
  EXPECT_EQ(floating(123456789.0), "123456789.0");
  EXPECT_EQ(floating(0.5), "0.5");
  EXPECT_EQ(floating(1.5e300), "1.5e+300");
  EXPECT_EQ(floating(1e20), "1e+20");
  EXPECT_EQ(floating(1e-7), "1e-07");
  EXPECT_EQ(floating(0.1), "0.1");  // shortest round-trip form
}

TEST(JsonEncoderTest, NonFiniteFloats) {
  EXPECT_EQ(floating(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(floating(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(floating(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(JsonEncoderTest, IntegerExtremes) {
  EXPECT_EQ(encode([](JsonEncoder &e) { e.integer(INT64_MIN); }), "-9223372036854775808");
  EXPECT_EQ(encode([](JsonEncoder &e) { e.integer(0); }), "0");
  EXPECT_EQ(encode([](JsonEncoder &e) { e.unsignedInteger(UINT64_MAX); }), "18446744073709551615");
}

TEST(JsonEncoderTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(quoted("a\"b"), "\"a\\\"b\"");
  EXPECT_EQ(quoted("C:\\dir"), "\"C:\\\\dir\"");
  EXPECT_EQ(quoted("l1\nl2\tx\ry"), "\"l1\\nl2\\tx\\ry\"");
  EXPECT_EQ(quoted(std::string_view("\x00\x01\x1f", 3)), "\"\\u0000\\u0001\\u001f\"");
  EXPECT_EQ(quoted("\b\f"), "\"\\u0008\\u000c\"");
  EXPECT_EQ(quoted("\x7f"), "\"\x7f\"");  // DEL needs no escape in JSON
  EXPECT_EQ(quoted(""), "\"\"");
}

TEST(JsonEncoderTest, Utf8PassesThrough) {
  EXPECT_EQ(quoted("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80"),
            "\"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80\"");
}

TEST(JsonEncoderTest, KeysAreEscapedToo) {
  EXPECT_EQ(encode([](JsonEncoder &e) {
              e.beginMap(1);
              e.key("k\"\n");
              e.null();
              e.endMap();
            }),
            "{\"k\\\"\\n\":null}");
}

TEST(JsonEncoderTest, NestedContainersAreCommaSeparated) {
  std::string out = encode([](JsonEncoder &e) {
    e.beginMap(3);
    e.key("a");
    e.beginArray(3);
    e.integer(1);
    e.unsignedInteger(2);
    e.beginMap(1);
    e.key("b");
    e.null();
    e.endMap();
    e.endArray();
    e.key("c");
    e.string("x");
    e.key("empty");
    e.beginArray(0);
    e.endArray();
    e.endMap();
  });
  EXPECT_EQ(out, "{\"a\":[1,2,{\"b\":null}],\"c\":\"x\",\"empty\":[]}");
}

TEST(JsonEncoderTest, TopLevelSequenceHasNoSeparators) {
  // Counts are ignored; top-level values are simply concatenated.
  EXPECT_EQ(encode([](JsonEncoder &e) {
              e.beginArray(99);
              e.endArray();
              e.beginMap(0);
              e.endMap();
            }),
            "[]{}");
}

}  // namespace
}  // namespace proton
