#include "viewer/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace proton::viewer {

MappedFile::~MappedFile() {
  if (mapped_ != nullptr) ::munmap(mapped_, size_);
}

Status MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {StatusCode::kIo, "cannot open " + path + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    size_ = static_cast<size_t>(st.st_size);
    // MAP_POPULATE maps every page now, far cheaper than a fault per page later.
    void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      ::madvise(p, size_, MADV_SEQUENTIAL);
      mapped_ = p;
      ::close(fd);
      return Status::ok();
    }
    size_ = 0;
  }
  char chunk[1 << 16];
  ssize_t got;
  while ((got = ::read(fd, chunk, sizeof chunk)) != 0) {
    if (got < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      return {StatusCode::kIo, "cannot read " + path + ": " + std::strerror(error)};
    }
    copy_.append(chunk, static_cast<size_t>(got));
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace proton::viewer
