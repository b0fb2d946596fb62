// JsonEncoder: a streaming, compact JSON emitter with the same interface as MsgpackEncoder,
// so the hatchet walk is written once for both formats.
//
//   JsonEncoder e(sink);
//   e.beginMap(1); e.key("a"); e.integer(1); e.endMap();     // {"a":1}
//
// Counts passed to begin* are ignored here (MessagePack needs them). Floats always carry a
// '.' or an exponent so that readers keep them as floats; non-finite floats are written as
// NaN/Infinity, which Python's json module reads. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "writers/writer.h"

namespace proton {

class JsonEncoder {
 public:
  explicit JsonEncoder(ByteSink &sink) : sink_(sink) {}

  void beginMap(size_t count);
  void endMap();
  void beginArray(size_t count);
  void endArray();
  void key(std::string_view k);
  void string(std::string_view s);
  void integer(int64_t v);
  void unsignedInteger(uint64_t v);
  void floating(double v);
  void null();
  void boolean(bool v);

 private:
  void separate();
  void quoted(std::string_view s);

  ByteSink &sink_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool afterKey_ = false;
};

}  // namespace proton
