// MsgpackEncoder: a streaming MessagePack emitter with JsonEncoder's interface.
//
//   MsgpackEncoder e(sink);
//   e.beginMap(1); e.key("a"); e.integer(1); e.endMap();     // 0x81 0xa1 'a' 0x01
//
// Containers need their element count up front; end*() are no-ops kept for symmetry.
// Integers use the smallest encoding; floats are float64. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "writers/writer.h"

namespace proton {

class MsgpackEncoder {
 public:
  explicit MsgpackEncoder(ByteSink &sink) : sink_(sink) {}

  void beginMap(size_t count);
  void endMap() {}
  void beginArray(size_t count);
  void endArray() {}
  void key(std::string_view k) { string(k); }
  void string(std::string_view s);
  void integer(int64_t v);
  void unsignedInteger(uint64_t v);
  void floating(double v);
  void null() { sink_.put(char(0xc0)); }

 private:
  void header(uint8_t fix, uint8_t fixLimit, uint8_t code16, size_t count);
  void bigEndian(uint64_t v, int bytes);

  ByteSink &sink_;
};

}  // namespace proton
