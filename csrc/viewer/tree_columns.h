// TreeColumns: a Hatchet tree profile read into flat pre-order columns, the viewer's fast
// path. Readers (hatchet_reader.h) fill it; the binding hands the columns to Python.
//
//   TreeColumns tree;
//   Status s = readHatchetJson(bytes, &tree);   // or readHatchetMsgpack
//   tree.strings[tree.nameIds[i]], tree.parents[i], tree.metrics[k].values[i]
//
// Node 0 is ROOT; parents[0] == -1. Every string (frame names, string metric values) is
// interned once in `strings`. A metric column holds one tagged 8-byte slot per node:
//
//   kinds[i]  | values[i]
//   kAbsent   | 0
//   kInt      | int64_t bits
//   kDouble   | double bits
//   kString   | string id (index into strings)
//   kOther    | a value that is neither (a list, a bool, null), given by Python: an index
//             | into the object table of the binding's ViewerTree; readers never make one
//
// Plain value type; not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace proton::viewer {

enum class ValueKind : uint8_t { kAbsent = 0, kInt, kDouble, kString, kOther };

struct MetricColumn {
  std::string name;
  std::vector<ValueKind> kinds;  // one per node once the reader finishes
  std::vector<uint64_t> values;  // see the table above
};

struct TreeColumns {
  std::vector<int32_t> parents;
  std::vector<uint32_t> nameIds;
  std::vector<std::string> strings;
  // In the order first seen while reading; a node lists its keys in column order.
  std::vector<MetricColumn> metrics;
  std::string metadata;  // ROOT's "proton_metadata" value, encoded as in the input; or ""
  std::string devices;   // the document's second element (the device table), as encoded

  size_t size() const { return parents.size(); }
};

// Interns strings into TreeColumns::strings: an open-addressing table of (hash, id), the
// strings themselves living only in `strings`.
class StringInterner {
 public:
  explicit StringInterner(std::vector<std::string> *strings) : strings_(strings), slots_(1024) {}

  uint32_t intern(std::string_view s) {
    uint64_t h = hash(s);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot &slot = slots_[i];
      if (slot.id == kEmpty) {
        auto id = static_cast<uint32_t>(strings_->size());
        strings_->emplace_back(s);
        slot = {h, id};
        if (strings_->size() * 2 > slots_.size()) grow();
        return id;
      }
      if (slot.hash == h && (*strings_)[slot.id] == s) return slot.id;
    }
  }

 private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = kEmpty;
  };

  // 8 bytes at a time, multiply-xorshift mixing; good enough for frame names.
  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 29);
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_t mask = slots_.size() - 1;
    for (const Slot &slot : old) {
      if (slot.id == kEmpty) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].id != kEmpty) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::vector<std::string> *strings_;
  std::vector<Slot> slots_;
};

}  // namespace proton::viewer
