// ProfileMetadata: what travels in a profile besides the data itself (tool version, command
// line, start time, session options, the stats table, how each user metric aggregates).
// Built by the session when it writes; a plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace proton {

struct ProfileMetadata {
  std::string toolVersion;
  std::string commandLine;
  // Where the program ran, so that viewers can show its files' paths relative to them;
  // each written only when known (non-empty).
  std::string workingDirectory;
  std::string script;  // the main script's absolute path (a Python program's)
  uint64_t startTimeUnixNs = 0;
  // The wall clock minus the monotonic clock (trace timestamps) when the profile is written,
  // so that a trace can say when its time 0 was; 0: unknown (not written).
  int64_t monotonicToUnixNs = 0;
  std::string sessionName;
  std::string context;
  std::string data;
  std::string backend;
  std::string mode;
  uint64_t phase = 0;
  int64_t rank = -1;      // written only for a process of a multi-process job
  int64_t worldSize = 0;  // 0: unknown
  std::string host;       // with rank: the machine the process ran on
  std::vector<std::pair<std::string, uint64_t>> stats;
  std::vector<std::string> exclusiveMetrics;  // names, suffix stripped
  std::vector<std::string> propertyMetrics;
};

}  // namespace proton
