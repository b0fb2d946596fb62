// TextSink: where the viewer's C++ renderer puts its text: a string, or a file descriptor
// through a fixed buffer, so that a 100 MB report is never held in memory at once.
//
//   TextSink out(1);                  // stdout; or TextSink out(&someString)
//   out.append("  time/s  name\n");
//   Status s = out.flush();           // kIo with errno's text when write() fails
//
// One owner thread; not thread-safe.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "core/status.h"

namespace proton::viewer {

class TextSink {
 public:
  explicit TextSink(int fd) : fd_(fd) { buffer_.reserve(kBufferSize); }
  explicit TextSink(std::string *out) : out_(out) {}
  ~TextSink() { (void)flush(); }
  TextSink(const TextSink &) = delete;
  TextSink &operator=(const TextSink &) = delete;

  void append(std::string_view s) {
    target().append(s);
    if (out_ == nullptr && buffer_.size() >= kBufferSize) drain();
  }
  void append(size_t count, char c) {
    target().append(count, c);
    if (out_ == nullptr && buffer_.size() >= kBufferSize) drain();
  }
  void push(char c) { target().push_back(c); }

  // Writes what is buffered; the first write error, if any (errno kept in error()).
  Status flush() {
    if (out_ == nullptr) drain();
    if (error_ == 0) return Status::ok();
    return {StatusCode::kIo, std::strerror(error_)};
  }
  int error() const { return error_; }

 private:
  static constexpr size_t kBufferSize = 1 << 20;

  std::string &target() { return out_ != nullptr ? *out_ : buffer_; }

  void drain() {
    const char *p = buffer_.data();
    size_t left = buffer_.size();
    while (left > 0 && error_ == 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno != EINTR) error_ = errno;
        continue;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    buffer_.clear();
  }

  int fd_ = -1;
  std::string *out_ = nullptr;
  std::string buffer_;
  int error_ = 0;
};

}  // namespace proton::viewer
