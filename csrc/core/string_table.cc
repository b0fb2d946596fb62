#include "core/string_table.h"

#include <atomic>
#include <mutex>

#include "core/check.h"
#include "core/thread_cache.h"

namespace proton {
namespace {

std::atomic<uint32_t> nextGeneration{1};

// One small cache per thread, for the table used last on that thread.
struct InternCache {
  uint32_t generation = 0;
  std::unordered_map<std::string_view, StringId> ids;
};

}  // namespace

StringTable::StringTable() : generation_(nextGeneration.fetch_add(1)) {
  // Id 0 is the empty string, so a zero-initialised StringId is a valid name.
  strings_.emplace_back();
  ids_.emplace(std::string_view(strings_.back()), StringId{0});
}

StringTable &StringTable::global() {
  static StringTable *table = new StringTable();  // never destroyed: used at exit
  return *table;
}

StringId StringTable::intern(std::string_view s) {
  // None at exit, after the thread's thread_local objects: the table itself.
  InternCache *found = ThreadCache<InternCache>::get();
  if (PROTON_UNLIKELY(!found)) return internSlow(s);
  InternCache &cache = *found;
  if (PROTON_LIKELY(cache.generation == generation_)) {
    auto it = cache.ids.find(s);
    if (it != cache.ids.end()) return it->second;
  } else {
    cache.ids.clear();
    cache.generation = generation_;
  }
  StringId id = internSlow(s);
  cache.ids.emplace(view(id), id);
  return id;
}

StringId StringTable::internSlow(std::string_view s) {
  {
    std::shared_lock lock(mu_);
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  PROTON_CHECK(strings_.size() < UINT32_MAX);
  StringId id{static_cast<uint32_t>(strings_.size())};
  strings_.emplace_back(s);
  ids_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string_view StringTable::view(StringId id) const {
  std::shared_lock lock(mu_);
  PROTON_CHECK(id.value < strings_.size());
  return strings_[id.value];
}

size_t StringTable::size() const {
  std::shared_lock lock(mu_);
  return strings_.size();
}

}  // namespace proton
