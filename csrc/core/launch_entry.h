// LaunchEntry, LaunchInfo: where one device launch was filed, in each session that recorded
// it, as the session manager attributes it (BackendHost::launchContext) and a backend keeps it
// until the vendor delivers the launch's records (backends/launch_table.h). Plain values.
#pragma once

#include <cstdint>

#include "core/ids.h"

namespace proton {

class Session;

// One session's view of a launch: the context node and phase it was filed under.
struct LaunchEntry {
  Session *session = nullptr;
  NodeId node;
  PhaseId phase;
  bool named = false;  // the kernel goes at <node>/<LaunchInfo::name> (launch metadata)
};

struct LaunchInfo {
  static constexpr uint32_t kMaxEntries = 4;
  uint32_t count = 0;
  bool multi = false;  // one launch, many records (a graph launch)
  uint64_t launchNs = 0;
  uint64_t threadId = 0;
  StringId name;  // the kernel's name given by launch metadata, for `named` entries
  LaunchEntry entries[kMaxEntries];
};

}  // namespace proton
