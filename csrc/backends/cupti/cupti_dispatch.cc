// proton::cuptiBackend() and the instrumentation entry points, routed to the backend of the
// CUPTI major that processCupti() chose (see cupti_dispatch.h, cupti_select.h).
#include "backends/cupti/cupti_dispatch.h"

#include <atomic>
#include <vector>

#include "backends/cupti/cupti_select.h"

namespace proton {
namespace cupti {
namespace {

const std::vector<const MajorBackend *> &builtBackends() {
  static const std::vector<const MajorBackend *> backends = {
#ifdef PROTON_HAS_CUPTI12
      &majorBackend<12>(),
#endif
#ifdef PROTON_HAS_CUPTI13
      &majorBackend<13>(),
#endif
  };
  return backends;
}

// The backend of the chosen major; nullptr until a library was chosen.
std::atomic<const MajorBackend *> chosenBackend{nullptr};

Result<const MajorBackend *> chooseBackend() {
  if (const MajorBackend *b = chosenBackend.load(std::memory_order_acquire)) return b;
  Result<CuptiLibrary> lib = processCupti();
  if (!lib.isOk()) return lib.status();
  for (const MajorBackend *b : builtBackends()) {
    if (b->major != lib.value().major) continue;
    chosenBackend.store(b, std::memory_order_release);
    return b;
  }
  return Status{StatusCode::kInternal,
                "[PROTON] no backend for CUDA " + std::to_string(lib.value().major) + "'s CUPTI"};
}

// Forwards to the chosen major's backend; acquire() makes the choice.
class CuptiDispatch final : public GpuBackend {
 public:
  const char *name() const override { return "cupti"; }
  Status acquire(Session &session) override {
    Result<const MajorBackend *> b = chooseBackend();
    if (!b.isOk()) return b.status();
    return b.value()->backend()->acquire(session);
  }
  void release(Session &session) override {
    if (const MajorBackend *b = chosenBackend.load(std::memory_order_acquire))
      b->backend()->release(session);
  }
  void flush() override {
    if (const MajorBackend *b = chosenBackend.load(std::memory_order_acquire))
      b->backend()->flush();
  }
};

}  // namespace
}  // namespace cupti

GpuBackend *cuptiBackend() {
  static cupti::CuptiDispatch dispatch;
  return &dispatch;
}

Status allocateInstrumentationBuffer(size_t bytes, bool trace, uint64_t stream,
                                     uint64_t *devicePtr) {
  *devicePtr = 0;
  // No library chosen yet means no session has started the backend: nothing to record into.
  const cupti::MajorBackend *b = cupti::chosenBackend.load(std::memory_order_acquire);
  return b ? b->allocateInstrumentationBuffer(bytes, trace, stream, devicePtr) : Status{};
}

// Kernels compile before any session chooses a major: every built backend keeps the tables
// and limits (plain memory; no CUPTI call).
Status registerInstrumentationTable(std::string_view text) {
  for (const cupti::MajorBackend *b : cupti::builtBackends())
    PROTON_RETURN_IF_ERROR(b->registerInstrumentationTable(text));
  return {};
}

void setInstrumentationLimits(uint64_t ringBytes, uint64_t maxTraceEvents, uint32_t traceCapacity) {
  for (const cupti::MajorBackend *b : cupti::builtBackends())
    b->setInstrumentationLimits(ringBytes, maxTraceEvents, traceCapacity);
}

}  // namespace proton
