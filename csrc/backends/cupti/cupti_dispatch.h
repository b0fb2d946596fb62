// The seam between the neutral CUPTI selector and the backend compiled once per CUPTI major.
// Each major's copy (cupti_backend.cc built against that major's headers, in namespace
// proton::cupti::v<major>) defines majorBackend<major>(); cupti_dispatch.cc, which sees no
// vendor header, routes proton::cuptiBackend() and the instrumentation entry points to the
// major whose library processCupti() chose.
//
//   const MajorBackend &b = majorBackend<13>();
//   b.backend()->acquire(session);
//
// Thread-safe: the table is immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backends/gpu_backend.h"

namespace proton::cupti {

struct MajorBackend {
  int major;
  GpuBackend *(*backend)();
  Status (*allocateInstrumentationBuffer)(size_t bytes, bool trace, uint64_t stream,
                                          uint64_t *devicePtr);
  Status (*registerInstrumentationTable)(std::string_view text);
  void (*setInstrumentationLimits)(uint64_t ringBytes, uint64_t maxTraceEvents,
                                   uint32_t traceCapacity);
};

// Defined by the copy of the backend built for `Major`; only majors in builtCuptiMajors().
template <int Major>
const MajorBackend &majorBackend();

}  // namespace proton::cupti
