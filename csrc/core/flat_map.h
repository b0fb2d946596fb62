// FlatMap: open-addressing hash map from a 64-bit key to a 32-bit value.
//
//   FlatMap children;
//   children.insert(key(parent, name), child);
//   if (const uint32_t *v = children.find(k)) ...
//
// Used for (parent, name) -> child lookups in the context tree: one probe sequence over a
// contiguous array, no allocation per entry. Not thread-safe; the owner serialises access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace proton {

class FlatMap {
 public:
  FlatMap() { slots_.resize(16); }

  const uint32_t *find(uint64_t key) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      const Slot &s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  // Inserts key -> value; the key must not be present.
  void insert(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    place(key, value);
    ++size_;
  }

  size_t size() const { return size_; }

  void clear() {
    slots_.assign(16, Slot{});
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };

  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }

  void place(uint64_t key, uint32_t value) {
    size_t mask = slots_.size() - 1;
    size_t i = hash(key) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = Slot{key, value, true};
  }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.resize(old.size() * 2);
    for (const Slot &s : old)
      if (s.used) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace proton
