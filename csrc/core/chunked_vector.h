// ChunkedVector<T>: an append-only sequence stored in fixed chunks, so growing it never moves
// what it holds. A trace of a million slices grown in one vector copied everything it held at
// each doubling and touched twice the memory it kept (half of a trace drain's time).
//
//   ChunkedVector<TraceEvent> events;
//   events.push_back(e);  events.append(batch.data(), batch.size());
//   for (const TraceEvent &e : events) ...;   events[i];   events.size();
//
// Not thread-safe (its owner serialises access); elements stay where they are until clear().
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <vector>

namespace proton {

template <typename T, size_t kChunk = 8192>
class ChunkedVector {
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

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T &operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  T &operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

  void push_back(const T &value) {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    chunks_.back()[size_ % kChunk] = value;
    ++size_;
  }
  void append(const T *values, size_t n) {
    for (size_t i = 0; i < n; ++i) push_back(values[i]);
  }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace proton
