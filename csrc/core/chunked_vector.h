// ChunkedVector<T>: an append-only sequence of trivially copyable values stored in fixed
// chunks, so growing it never moves what it holds. A trace of a million slices grown in one
// vector copied everything it held at each doubling and touched twice the memory it kept.
// Chunks are PopulatedPages: faulting 80 MB in one page at a time was most of a trace drain's
// time on a virtual machine.
//
//   ChunkedVector<TraceEvent> events;
//   events.push_back(e);  events.append(batch.data(), batch.size());
//   for (const TraceEvent &e : events) ...;   events[i];   events.size();
//
// Not thread-safe (its owner serialises access); elements stay where they are until clear().
#pragma once

#include <bit>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/populated_pages.h"

namespace proton {

// Chunk k holds kFirst << min(k, kDoublings) elements: a phase with a few events maps one page,
// a million slices map 4 MB chunks.
template <typename T>
class ChunkedVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static constexpr size_t kFirst = sizeof(T) < 4096 ? 4096 / sizeof(T) : 1;
  static constexpr size_t kDoublings = 10;
  static constexpr size_t kLargest = kFirst << kDoublings;
  static constexpr size_t kBeforeLargest = kFirst * ((size_t{1} << kDoublings) - 1);

 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T *;
    using reference = const T &;

    const_iterator(const ChunkedVector *v, size_t i) : v_(v), i_(i) {}
    reference operator*() const { return (*v_)[i_]; }
    pointer operator->() const { return &(*v_)[i_]; }
    const_iterator &operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++i_;
      return before;
    }
    bool operator==(const const_iterator &o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator &o) const { return i_ != o.i_; }

   private:
    const ChunkedVector *v_;
    size_t i_;
  };

  ChunkedVector() = default;
  ChunkedVector(const ChunkedVector &) = delete;
  ChunkedVector &operator=(const ChunkedVector &) = delete;
  ~ChunkedVector() { clear(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T &operator[](size_t i) const {
    auto [chunk, offset] = locate(i);
    return reinterpret_cast<const T *>(chunks_[chunk].data())[offset];
  }
  T &operator[](size_t i) {
    auto [chunk, offset] = locate(i);
    return chunkAt(chunk)[offset];
  }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

  void push_back(const T &value) {
    if (size_ == capacity_) addChunk();
    if (room_ == 0) room_ = capacityOf(used_++);
    chunkAt(used_ - 1)[capacityOf(used_ - 1) - room_--] = value;
    ++size_;
  }
  void append(const T *values, size_t n) {
    for (size_t i = 0; i < n; ++i) push_back(values[i]);
  }
  void clear() {
    chunks_.clear();
    size_ = capacity_ = used_ = room_ = 0;
  }

 private:
  static size_t capacityOf(size_t chunk) { return chunk < kDoublings ? kFirst << chunk : kLargest; }
  // Element i: (chunk, offset in it).
  static std::pair<size_t, size_t> locate(size_t i) {
    if (i < kBeforeLargest) {
      size_t k = std::bit_width(i / kFirst + 1) - 1;  // chunks before k hold kFirst * (2^k - 1)
      return {k, i - kFirst * ((size_t{1} << k) - 1)};
    }
    size_t past = i - kBeforeLargest;
    return {kDoublings + past / kLargest, past % kLargest};
  }
  T *chunkAt(size_t k) { return reinterpret_cast<T *>(chunks_[k].data()); }
  void addChunk() {
    chunks_.emplace_back(capacityOf(chunks_.size()) * sizeof(T));
    capacity_ += capacityOf(chunks_.size() - 1);
  }

  std::vector<PopulatedPages> chunks_;
  size_t size_ = 0;
  size_t capacity_ = 0;  // elements the mapped chunks hold
  size_t used_ = 0;      // chunks written into
  size_t room_ = 0;      // elements left in the last of those
};

}  // namespace proton
