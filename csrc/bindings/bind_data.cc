// In-memory access to a session's data by phase.
#include <nanobind/stl/string.h>

#include "bindings/common.h"
#include "runtime/session_manager.h"

namespace proton::bindings {

void bindData(nb::module_ &m) {
  auto serialize = [](int session, uint64_t phase, const char *format) {
    Result<std::string> r = [&] {
      nb::gil_scoped_release release;
      return SessionManager::global().serialize(SessionId{session}, PhaseId{phase}, format);
    }();
    return valueOrThrow(std::move(r));
  };
  m.def(
      "get_json",
      [serialize](int session, uint64_t phase) { return serialize(session, phase, ""); },
      nb::arg("session"), nb::arg("phase"),
      "The phase in the data kind's default text format (Hatchet JSON or Chrome trace).");
  m.def(
      "get_msgpack",
      [serialize](int session, uint64_t phase) {
        std::string bytes = serialize(session, phase, "hatchet_msgpack");
        return nb::bytes(bytes.data(), bytes.size());
      },
      nb::arg("session"), nb::arg("phase"));
  m.def(
      "advance_phase",
      [](int session) {
        // Released: with periodic flushing this may flush, which waits for other threads'
        // CUDA graph captures to end (they may need the GIL to get there).
        Result<PhaseId> next = [&] {
          nb::gil_scoped_release release;
          return SessionManager::global().advancePhase(SessionId{session});
        }();
        return valueOrThrow(std::move(next)).value;
      },
      nb::arg("session"));
  m.def(
      "is_phase_complete",
      [](int session, uint64_t phase) {
        return valueOrThrow(
            SessionManager::global().isPhaseComplete(SessionId{session}, PhaseId{phase}));
      },
      nb::arg("session"), nb::arg("phase"));
  m.def(
      "clear",
      [](int session, uint64_t phase, bool upTo) {
        throwIfError(SessionManager::global().clear(SessionId{session}, PhaseId{phase}, upTo));
      },
      nb::arg("session"), nb::arg("phase"), nb::arg("clear_up_to_phase"));
}

}  // namespace proton::bindings
