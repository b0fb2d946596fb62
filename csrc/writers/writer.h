// Writers: one file per output format, each turning a phase of a session into bytes.
//
//   StringSink sink;
//   PROTON_RETURN_IF_ERROR(writeProfile(OutputFormat::kHatchet, view, sink));
//
// Writers only read: the data model never serialises itself. A ProfileView bundles what a
// writer may read. Writers run on the finalizing thread while the session lock is held.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "core/device_info.h"
#include "core/options.h"
#include "core/profile_data.h"
#include "core/profile_metadata.h"
#include "core/string_table.h"

namespace proton {

// How a trace lays out intra-kernel warp slices (mode option trace_layout):
//   kFull    warp slices as triton.profiler writes them, then kernel slices, CPU scopes and
//            launch flows, all on one clock (the default);
//   kTriton  warp slices only, exactly the events triton.profiler writes.
enum class TraceLayout : uint8_t { kFull = 0, kTriton };

struct ProfileView {
  const PhaseData &phase;
  const ProfileMetadata &metadata;
  const DeviceTable &devices;
  const StringTable &strings;
  TraceLayout traceLayout = TraceLayout::kFull;
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void append(const char *data, size_t size) = 0;
  void append(std::string_view s) { append(s.data(), s.size()); }
  void put(char c) { append(&c, 1); }
};

class StringSink final : public ByteSink {
 public:
  void append(const char *data, size_t size) override { out.append(data, size); }
  std::string out;
};

// Buffers and writes to a FILE*; ok() turns false on the first failed write.
class FileSink final : public ByteSink {
 public:
  explicit FileSink(std::FILE *file) : file_(file) { buffer_.reserve(kBufferSize); }
  ~FileSink() override { flush(); }
  void append(const char *data, size_t size) override;
  bool flush();
  bool ok() const { return ok_; }

 private:
  static constexpr size_t kBufferSize = 1 << 20;
  std::FILE *file_;
  std::string buffer_;
  bool ok_ = true;
};

Status writeHatchetJson(const ProfileView &view, ByteSink &sink);
Status writeHatchetMsgpack(const ProfileView &view, ByteSink &sink);
Status writeChromeTrace(const ProfileView &view, ByteSink &sink);

// Dispatches on format (which must not be kDefault).
Status writeProfile(OutputFormat format, const ProfileView &view, ByteSink &sink);

}  // namespace proton
