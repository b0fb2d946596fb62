// StringTable: interns strings to 32-bit StringIds, once per process.
//
//   StringId id = StringTable::global().intern("matmul_kernel");
//   std::string_view name = StringTable::global().view(id);
//
// Thread-safe. intern() first looks in a thread-local cache (no lock); a miss takes a shared
// lock, and only a string never seen before takes the exclusive lock. Strings are never freed,
// so a view stays valid for the life of the process.
#pragma once

#include <deque>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/fork_lock.h"
#include "core/ids.h"

namespace proton {

class StringTable {
 public:
  StringTable();

  static StringTable &global();
  // Around fork() (runtime/fork_safety.cc; core/fork_lock.h says how the lock is released).
  void lockForFork() { mu_.lock(); }
  void unlockAfterFork(bool inChild) { releaseAfterFork(mu_, inChild); }

  StringId intern(std::string_view s);
  std::string_view view(StringId id) const;
  size_t size() const;

 private:
  StringId internSlow(std::string_view s);

  mutable std::shared_mutex mu_;
  std::deque<std::string> strings_;  // stable addresses
  std::unordered_map<std::string_view, StringId> ids_;
  const uint32_t generation_;  // distinguishes tables in the thread-local cache
};

}  // namespace proton
