// BackendHost: what a vendor backend asks of the sessions it serves, without seeing the
// runtime that composes them. The runtime implements it (runtime/session_host.cc, over the
// SessionManager); nothing under core/ or backends/ includes runtime/.
//
//   BackendHost &host = BackendHost::get();            // a launch callback, any thread
//   size_t n = host.launchContext(entries, LaunchInfo::kMaxEntries, &threadId, &name);
//   ...                                                // the launch is recorded under them
//   host.endLaunch(entries, n, ran);                   // its API exit
//
// The runtime installs its host when its session manager is made, before any backend starts;
// until then get() gives a host with no sessions. Thread-safe: every function may be called
// from any thread, at launch rate (no shared lock, no allocation on the launch path).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/capture_context.h"
#include "core/ids.h"
#include "core/launch_entry.h"
#include "core/status.h"

namespace proton {

class BackendHost {
 public:
  static BackendHost &get();
  // `host` lives as long as the process (backends' callbacks may race exit).
  static void install(BackendHost *host);
  virtual ~BackendHost() = default;

  // A session is live (one relaxed atomic load).
  virtual bool profilingOn() const = 0;
  // A live session keeps trace data: launches need their CPU time.
  virtual bool traceLive() const = 0;
  // Where a launch by the calling thread belongs in every active session, at most `max`
  // entries; threadId receives the OS thread id. launchName (optional) receives the name given
  // by pending launch metadata (0: none): the entries are then marked `named`, and the
  // metadata is held until endLaunch().
  virtual size_t launchContext(LaunchEntry *out, size_t max, uint64_t *threadId,
                               StringId *launchName) = 0;
  // The launch that launchContext() attributed returned: ran = it was enqueued to run (not
  // failed, not captured into a graph). A launch that ran gets its launch metadata's metrics.
  virtual void endLaunch(const LaunchEntry *entries, size_t n, bool ran) = 0;
  // For a graph node created now on this thread: its context, the sessions that do not record
  // now, and (inLaunch: created by the launch in progress) that launch's metadata.
  virtual void captureContext(CaptureContext &out, bool inLaunch) = 0;
  // A vendor range (NVTX, roctx) pushed or popped on the calling thread: a scope of it.
  // exitRange fails when `name` is not the innermost open scope.
  virtual Status enterRange(StringId name) = 0;
  virtual Status exitRange(StringId name) = 0;
};

}  // namespace proton
