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
//
// Plain value type; not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace proton::viewer {

enum class ValueKind : uint8_t { kAbsent = 0, kInt, kDouble, kString };

struct MetricColumn {
  std::string name;
  std::vector<ValueKind> kinds;             // one per node once the reader finishes
  std::vector<uint64_t> values;             // see the table above
  ValueKind lastKind = ValueKind::kAbsent;  // kind of the last value in pre-order
};

struct TreeColumns {
  std::vector<int32_t> parents;
  std::vector<uint32_t> nameIds;
  std::vector<std::string> strings;
  std::vector<MetricColumn> metrics;  // in first-seen (pre-order) order
  std::string metadata;  // ROOT's "proton_metadata" value, encoded as in the input; or ""
  std::string devices;   // the document's second element (the device table), as encoded

  size_t size() const { return parents.size(); }
};

// Interns strings into TreeColumns::strings.
class StringInterner {
 public:
  explicit StringInterner(std::vector<std::string> *strings) : strings_(strings) {}
  uint32_t intern(std::string_view s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    auto id = static_cast<uint32_t>(strings_->size());
    strings_->emplace_back(s);
    owned_.push_back(std::make_unique<std::string>(s));
    ids_.emplace(*owned_.back(), id);
    return id;
  }

 private:
  std::vector<std::string> *strings_;
  std::vector<std::unique_ptr<std::string>> owned_;  // stable keys for ids_
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace proton::viewer
