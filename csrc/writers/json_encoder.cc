#include "writers/json_encoder.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace proton {

void JsonEncoder::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) sink_.put(',');
    first_.back() = false;
  }
}

void JsonEncoder::beginMap(size_t) {
  separate();
  sink_.put('{');
  first_.push_back(true);
}

void JsonEncoder::endMap() {
  first_.pop_back();
  sink_.put('}');
}

void JsonEncoder::beginArray(size_t) {
  separate();
  sink_.put('[');
  first_.push_back(true);
}

void JsonEncoder::endArray() {
  first_.pop_back();
  sink_.put(']');
}

void JsonEncoder::key(std::string_view k) {
  separate();
  quoted(k);
  sink_.put(':');
  afterKey_ = true;
}

void JsonEncoder::string(std::string_view s) {
  separate();
  quoted(s);
}

void JsonEncoder::quoted(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  sink_.put('"');
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    sink_.append(s.data() + start, i - start);
    start = i + 1;
    switch (c) {
      case '"':
        sink_.append("\\\"", 2);
        break;
      case '\\':
        sink_.append("\\\\", 2);
        break;
      case '\n':
        sink_.append("\\n", 2);
        break;
      case '\t':
        sink_.append("\\t", 2);
        break;
      case '\r':
        sink_.append("\\r", 2);
        break;
      default: {
        char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        sink_.append(esc, 6);
      }
    }
  }
  sink_.append(s.data() + start, s.size() - start);
  sink_.put('"');
}

void JsonEncoder::integer(int64_t v) {
  separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  sink_.append(buf, r.ptr - buf);
}

void JsonEncoder::unsignedInteger(uint64_t v) {
  separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  sink_.append(buf, r.ptr - buf);
}

void JsonEncoder::floating(double v) {
  separate();
  if (std::isnan(v)) return sink_.append("NaN");
  if (std::isinf(v)) return sink_.append(v > 0 ? "Infinity" : "-Infinity");
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  size_t n = r.ptr - buf;
  if (!std::memchr(buf, '.', n) && !std::memchr(buf, 'e', n)) {
    buf[n++] = '.';
    buf[n++] = '0';
  }
  sink_.append(buf, n);
}

void JsonEncoder::null() {
  separate();
  sink_.append("null");
}

void JsonEncoder::boolean(bool v) {
  separate();
  sink_.append(v ? "true" : "false");
}

}  // namespace proton
