#include "writers/msgpack_encoder.h"

#include <cstring>

namespace proton {

void MsgpackEncoder::bigEndian(uint64_t v, int bytes) {
  char buf[8];
  for (int i = 0; i < bytes; ++i) buf[i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
  sink_.append(buf, bytes);
}

// fix forms hold counts below fixLimit; then 16-bit (code16) and 32-bit (code16 + 1) forms.
void MsgpackEncoder::header(uint8_t fix, uint8_t fixLimit, uint8_t code16, size_t count) {
  if (count < fixLimit) {
    sink_.put(static_cast<char>(fix | count));
  } else if (count <= 0xffff) {
    sink_.put(static_cast<char>(code16));
    bigEndian(count, 2);
  } else {
    sink_.put(static_cast<char>(code16 + 1));
    bigEndian(count, 4);
  }
}

void MsgpackEncoder::beginMap(size_t count) { header(0x80, 16, 0xde, count); }
void MsgpackEncoder::beginArray(size_t count) { header(0x90, 16, 0xdc, count); }

void MsgpackEncoder::string(std::string_view s) {
  if (s.size() < 32) {
    sink_.put(static_cast<char>(0xa0 | s.size()));
  } else if (s.size() <= 0xff) {
    sink_.put(char(0xd9));
    bigEndian(s.size(), 1);
  } else if (s.size() <= 0xffff) {
    sink_.put(char(0xda));
    bigEndian(s.size(), 2);
  } else {
    sink_.put(char(0xdb));
    bigEndian(s.size(), 4);
  }
  sink_.append(s.data(), s.size());
}

void MsgpackEncoder::unsignedInteger(uint64_t v) {
  if (v < 0x80) {
    sink_.put(static_cast<char>(v));
  } else if (v <= 0xff) {
    sink_.put(char(0xcc));
    bigEndian(v, 1);
  } else if (v <= 0xffff) {
    sink_.put(char(0xcd));
    bigEndian(v, 2);
  } else if (v <= 0xffffffffull) {
    sink_.put(char(0xce));
    bigEndian(v, 4);
  } else {
    sink_.put(char(0xcf));
    bigEndian(v, 8);
  }
}

void MsgpackEncoder::integer(int64_t v) {
  if (v >= 0) return unsignedInteger(static_cast<uint64_t>(v));
  if (v >= -32) {
    sink_.put(static_cast<char>(static_cast<int8_t>(v)));
  } else if (v >= INT8_MIN) {
    sink_.put(char(0xd0));
    bigEndian(static_cast<uint8_t>(v), 1);
  } else if (v >= INT16_MIN) {
    sink_.put(char(0xd1));
    bigEndian(static_cast<uint16_t>(v), 2);
  } else if (v >= INT32_MIN) {
    sink_.put(char(0xd2));
    bigEndian(static_cast<uint32_t>(v), 4);
  } else {
    sink_.put(char(0xd3));
    bigEndian(static_cast<uint64_t>(v), 8);
  }
}

void MsgpackEncoder::floating(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  sink_.put(char(0xcb));
  bigEndian(bits, 8);
}

}  // namespace proton
