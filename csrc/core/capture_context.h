// CaptureContext: what a CUDA-graph node carries from its capture to every replay, as the
// session manager describes it (BackendHost::captureContext) and a backend's capture
// registry keeps it. Vendor-neutral; a plain value, immutable once registered.
#pragma once

#include <vector>

#include "core/ids.h"
#include "core/metric.h"

namespace proton {

// What a CUDA-graph node captured on the calling thread carries to every replay of it: the
// context it was captured in, the launch metadata of the launch that captured it, and the
// sessions that did not record at capture (deactivated then), which do not record its replays.
struct CaptureContext {
  std::vector<StringId> names;          // Python frames, scopes, state: outermost first
  StringId kernelName;                  // the launch metadata's name; 0 = the kernel's own
  MetricList metrics;                   // the launch metadata's metrics, added at each replay
  std::vector<SessionId> notRecording;  // live at capture, but deactivated

  bool records(SessionId s) const {
    for (SessionId n : notRecording)
      if (n == s) return false;
    return true;
  }
};

}  // namespace proton
