#include "writers/writer.h"

namespace proton {

void FileSink::append(const char *data, size_t size) {
  if (buffer_.size() + size > kBufferSize) flush();
  if (size > kBufferSize) {
    if (ok_ && std::fwrite(data, 1, size, file_) != size) ok_ = false;
    return;
  }
  buffer_.append(data, size);
}

bool FileSink::flush() {
  if (!buffer_.empty()) {
    if (ok_ && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) ok_ = false;
    buffer_.clear();
  }
  return ok_;
}

Status writeProfile(OutputFormat format, const ProfileView &view, ByteSink &sink) {
  switch (format) {
    case OutputFormat::kHatchet:
      return writeHatchetJson(view, sink);
    case OutputFormat::kHatchetMsgpack:
      return writeHatchetMsgpack(view, sink);
    case OutputFormat::kChromeTrace:
      return writeChromeTrace(view, sink);
    case OutputFormat::kDefault:
      break;
  }
  return {StatusCode::kInternal, "[PROTON] writeProfile called without a concrete format"};
}

}  // namespace proton
