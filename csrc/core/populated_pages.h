// PopulatedPages: anonymous host memory whose pages are faulted in by the one call that maps
// it. Memory filled right after it is allocated (a trace's storage, a slot read back from the
// GPU) otherwise takes a page fault per 4 KB; on a virtual machine those were most of the
// time it took to fill it. Zeroed; moves, never copies.
//
//   PopulatedPages pages(bytes);   memcpy(pages.data(), src, bytes);
//
// Not thread-safe (one owner). Throws std::bad_alloc when it cannot be mapped.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace proton {

class PopulatedPages {
 public:
  PopulatedPages() = default;
  explicit PopulatedPages(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<uint8_t *>(p);
  }
  PopulatedPages(PopulatedPages &&o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PopulatedPages &operator=(PopulatedPages &&o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  PopulatedPages(const PopulatedPages &) = delete;
  PopulatedPages &operator=(const PopulatedPages &) = delete;
  ~PopulatedPages() {
    if (data_) munmap(data_, size_);
  }

  uint8_t *data() { return data_; }
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace proton
