// MappedFile: a whole file's bytes for the readers, mapped read-only from the page cache
// (no copy, no heap) when it is a regular file, else read into memory (pipes, /proc).
//
//   MappedFile file;
//   Status s = file.open("run.hatchet");       // kIo naming the file when it cannot
//   readHatchetJson(file.bytes(), &tree);      // valid until `file` goes
//
// One owner; not thread-safe to open while another thread reads bytes().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace proton::viewer {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  Status open(const std::string &path);
  std::string_view bytes() const {
    return mapped_ != nullptr ? std::string_view(static_cast<const char *>(mapped_), size_)
                              : std::string_view(copy_);
  }

 private:
  void *mapped_ = nullptr;
  size_t size_ = 0;
  std::string copy_;  // when the file could not be mapped
};

}  // namespace proton::viewer
