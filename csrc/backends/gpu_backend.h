// GpuBackend: the interface the session manager uses to drive a vendor tracing layer,
// without seeing any vendor header.
//
//   GpuBackend *b = cuptiBackend();             // nullptr: built without CUPTI headers
//   PROTON_RETURN_IF_ERROR(b->acquire(session)); // the first acquire starts tracing
//   b->flush();                                 // every launched kernel delivered
//   b->release(session);                        // the last release stops tracing
//
// Thread-safe. Launch attribution goes the other way: the backend's launch callback asks
// BackendHost::launchContext() (core/backend_host.h) where the calling thread's launch belongs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace proton {

class Session;

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual const char *name() const = 0;
  // Starts serving one session. The backend checks the session's mode
  // (session.options().mode) and rejects one it does not support (kInvalidArgument for a bad
  // option value, kUnavailable otherwise). kUnavailable: the vendor library is missing or
  // unusable; kBusy: another tool holds the vendor tracing layer. Either way nothing is left
  // half started. The session outlives the matching release().
  virtual Status acquire(Session &session) = 0;
  virtual void release(Session &session) = 0;
  // Waits until every kernel launched so far has been delivered and filed (bounded wait).
  virtual void flush() = 0;
};

GpuBackend *cuptiBackend();

// Intra-kernel instrumentation (backend="instrumentation"), on the launching thread: a device
// buffer for the next kernel this thread launches (0: record nothing for it). `bytes` is the
// launch's trace buffer size; tree buffers have a fixed size.
Status allocateInstrumentationBuffer(size_t bytes, bool trace, uint64_t stream,
                                     uint64_t *devicePtr);
// A kernel's scope table (instrumentation::encodeTable's text), from compile or cache load.
Status registerInstrumentationTable(std::string_view text);
void setInstrumentationLimits(uint64_t ringBytes, uint64_t maxTraceEvents, uint32_t traceCapacity);

// Extra directories to search for vendor libraries (e.g. the CUPTI inside an installed
// Triton or NVIDIA wheel), found by the Python layer. Thread-safe.
void setLibrarySearchDirs(std::vector<std::string> dirs);
std::vector<std::string> librarySearchDirs();

}  // namespace proton
