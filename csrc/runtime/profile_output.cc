#include "runtime/profile_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace proton {
namespace {

Status writeFileAtomically(const std::string &path, const ProfileView &view, OutputFormat format) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::FILE *file = std::fopen(tmp.c_str(), "wb");
  if (!file) {
    return {StatusCode::kIo,
            "[PROTON] Cannot write profile to '" + path + "': " + std::strerror(errno)};
  }
  Status status;
  bool ok;
  {
    FileSink sink(file);
    status = writeProfile(format, view, sink);
    ok = sink.flush();
  }
  ok = (std::fclose(file) == 0) && ok;
  if (status.isOk() && !ok)
    status = {StatusCode::kIo,
              "[PROTON] Writing profile '" + path + "' failed: " + std::strerror(errno)};
  if (status.isOk() && std::rename(tmp.c_str(), path.c_str()) != 0)
    status = {StatusCode::kIo,
              "[PROTON] Cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno)};
  if (!status.isOk()) std::remove(tmp.c_str());
  return status;
}

}  // namespace

bool isStdoutPath(const std::string &path) { return path.empty() || path == "-"; }

std::string profilePath(const SessionOptions &options, std::optional<PhaseId> part,
                        OutputFormat format) {
  if (isStdoutPath(options.path)) return "-";
  std::string ext = std::string(".") + outputFormatName(format);
  std::string stem = options.path;
  if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());  // the user already named the extension
  stem += rankSuffix(options.rank);
  if (part) stem += ".part_" + std::to_string(part->value);
  return stem + ext;
}

Status writeProfileFile(const std::string &path, const ProfileView &view, OutputFormat format) {
  if (path != "-") return writeFileAtomically(path, view, format);
  FileSink sink(stdout);
  Status status = writeProfile(format, view, sink);
  if (status.isOk() && !sink.flush())
    status = {StatusCode::kIo, "[PROTON] Writing the profile to stdout failed"};
  std::fflush(stdout);
  return status;
}

}  // namespace proton
