// MessagePack encodings at every size boundary, against bytes written out by hand from the
// MessagePack specification.
#include "writers/msgpack_encoder.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace proton {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename F>
Bytes encode(F &&f) {
  StringSink sink;
  MsgpackEncoder e(sink);
  f(e);
  return Bytes(sink.out.begin(), sink.out.end());
}

Bytes u(uint64_t v) {
  return encode([&](MsgpackEncoder &e) { e.unsignedInteger(v); });
}
Bytes i(int64_t v) {
  return encode([&](MsgpackEncoder &e) { e.integer(v); });
}
// Only the header: the payload is checked separately.
Bytes strHeader(size_t n, size_t headerSize) {
  std::string s(n, 'x');
  Bytes b = encode([&](MsgpackEncoder &e) { e.string(s); });
  EXPECT_EQ(b.size(), headerSize + n);
  EXPECT_EQ(std::string(b.begin() + headerSize, b.end()), s);
  return Bytes(b.begin(), b.begin() + headerSize);
}
Bytes arr(size_t n) {
  return encode([&](MsgpackEncoder &e) { e.beginArray(n); });
}
Bytes map(size_t n) {
  return encode([&](MsgpackEncoder &e) { e.beginMap(n); });
}

TEST(MsgpackEncoderTest, UnsignedIntegers) {
  EXPECT_EQ(u(0), (Bytes{0x00}));
  EXPECT_EQ(u(127), (Bytes{0x7f}));
  EXPECT_EQ(u(128), (Bytes{0xcc, 0x80}));
  EXPECT_EQ(u(255), (Bytes{0xcc, 0xff}));
  EXPECT_EQ(u(256), (Bytes{0xcd, 0x01, 0x00}));
  EXPECT_EQ(u(65535), (Bytes{0xcd, 0xff, 0xff}));
  EXPECT_EQ(u(65536), (Bytes{0xce, 0x00, 0x01, 0x00, 0x00}));
  EXPECT_EQ(u(4294967295u), (Bytes{0xce, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(u(4294967296u), (Bytes{0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00}));
  EXPECT_EQ(u(UINT64_MAX), (Bytes{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
}

TEST(MsgpackEncoderTest, NonNegativeSignedUseTheUnsignedForms) {
  EXPECT_EQ(i(0), (Bytes{0x00}));
  EXPECT_EQ(i(127), (Bytes{0x7f}));
  EXPECT_EQ(i(200), (Bytes{0xcc, 0xc8}));
  EXPECT_EQ(i(INT64_MAX), (Bytes{0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
}

TEST(MsgpackEncoderTest, NegativeIntegers) {
  EXPECT_EQ(i(-1), (Bytes{0xff}));
  EXPECT_EQ(i(-32), (Bytes{0xe0}));
  EXPECT_EQ(i(-33), (Bytes{0xd0, 0xdf}));
  EXPECT_EQ(i(-128), (Bytes{0xd0, 0x80}));
  EXPECT_EQ(i(-129), (Bytes{0xd1, 0xff, 0x7f}));
  EXPECT_EQ(i(-32768), (Bytes{0xd1, 0x80, 0x00}));
  EXPECT_EQ(i(-32769), (Bytes{0xd2, 0xff, 0xff, 0x7f, 0xff}));
  EXPECT_EQ(i(INT32_MIN), (Bytes{0xd2, 0x80, 0x00, 0x00, 0x00}));
  EXPECT_EQ(i(int64_t{INT32_MIN} - 1),
            (Bytes{0xd3, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff}));
  EXPECT_EQ(i(INT64_MIN), (Bytes{0xd3, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}));
}

TEST(MsgpackEncoderTest, StringHeaders) {
  EXPECT_EQ(strHeader(0, 1), (Bytes{0xa0}));
  EXPECT_EQ(strHeader(31, 1), (Bytes{0xbf}));
  EXPECT_EQ(strHeader(32, 2), (Bytes{0xd9, 0x20}));
  EXPECT_EQ(strHeader(255, 2), (Bytes{0xd9, 0xff}));
  EXPECT_EQ(strHeader(256, 3), (Bytes{0xda, 0x01, 0x00}));
  EXPECT_EQ(strHeader(65535, 3), (Bytes{0xda, 0xff, 0xff}));
  EXPECT_EQ(strHeader(65536, 5), (Bytes{0xdb, 0x00, 0x01, 0x00, 0x00}));
}

TEST(MsgpackEncoderTest, StringBytesAreCopiedVerbatim) {
  EXPECT_EQ(encode([](MsgpackEncoder &e) { e.string(std::string_view("\0\xc3\xa9", 3)); }),
            (Bytes{0xa3, 0x00, 0xc3, 0xa9}));
  EXPECT_EQ(encode([](MsgpackEncoder &e) { e.key("ab"); }), (Bytes{0xa2, 'a', 'b'}));
}

TEST(MsgpackEncoderTest, ArrayHeaders) {
  EXPECT_EQ(arr(0), (Bytes{0x90}));
  EXPECT_EQ(arr(15), (Bytes{0x9f}));
  EXPECT_EQ(arr(16), (Bytes{0xdc, 0x00, 0x10}));
  EXPECT_EQ(arr(65535), (Bytes{0xdc, 0xff, 0xff}));
  EXPECT_EQ(arr(65536), (Bytes{0xdd, 0x00, 0x01, 0x00, 0x00}));
}

TEST(MsgpackEncoderTest, MapHeaders) {
  EXPECT_EQ(map(0), (Bytes{0x80}));
  EXPECT_EQ(map(15), (Bytes{0x8f}));
  EXPECT_EQ(map(16), (Bytes{0xde, 0x00, 0x10}));
  EXPECT_EQ(map(65535), (Bytes{0xde, 0xff, 0xff}));
  EXPECT_EQ(map(65536), (Bytes{0xdf, 0x00, 0x01, 0x00, 0x00}));
}

TEST(MsgpackEncoderTest, FloatsAreFloat64BigEndian) {
  auto f = [](double v) { return encode([&](MsgpackEncoder &e) { e.floating(v); }); };
  EXPECT_EQ(f(1.0), (Bytes{0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(-2.5), (Bytes{0xcb, 0xc0, 0x04, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(0.0), (Bytes{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(std::numeric_limits<double>::infinity()),
            (Bytes{0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(std::numeric_limits<double>::quiet_NaN()),
            (Bytes{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0}));
}

TEST(MsgpackEncoderTest, NestedDocument) {
  // {"a": [1, -1, "x", nil]}
  Bytes b = encode([](MsgpackEncoder &e) {
    e.beginMap(1);
    e.key("a");
    e.beginArray(4);
    e.integer(1);
    e.integer(-1);
    e.string("x");
    e.null();
    e.endArray();
    e.endMap();
  });
  EXPECT_EQ(b, (Bytes{0x81, 0xa1, 'a', 0x94, 0x01, 0xff, 0xa1, 'x', 0xc0}));
}

}  // namespace
}  // namespace proton
