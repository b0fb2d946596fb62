// Where a session's profile goes and how a file of it is written.
//
//   std::string path = profilePath(options, PhaseId{3}, OutputFormat::kHatchet);
//   // "out.rank1.part_3.hatchet" for options.path "out" under torchrun rank 1
//   PROTON_RETURN_IF_ERROR(writeProfileFile(path, view, OutputFormat::kHatchet));
//
// Names: <path>[.rank<R>][.part_<P>].<ext>; a path that already ends in .<ext> keeps it
// once. A path of "" or "-" means stdout. Files are written to a temporary name and renamed,
// so a reader never sees half a file. Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>

#include "core/ids.h"
#include "core/options.h"
#include "writers/writer.h"

namespace proton {

bool isStdoutPath(const std::string &path);
std::string profilePath(const SessionOptions &options, std::optional<PhaseId> part,
                        OutputFormat format);
// Writes to stdout when path is "-".
Status writeProfileFile(const std::string &path, const ProfileView &view, OutputFormat format);

}  // namespace proton
