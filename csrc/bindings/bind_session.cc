// Session lifecycle: start, activate, deactivate, finalize.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "api/injection.h"
#include "backends/gpu_backend.h"
#include "backends/runtime_probe.h"
#include "bindings/common.h"
#include "core/stats.h"
#include "runtime/session_manager.h"
#if PROTON_HAS_CUPTI
#include "backends/cupti/cupti_select.h"
#endif

namespace proton::bindings {
namespace {

std::optional<SessionId> toId(std::optional<int> session) {
  if (!session) return std::nullopt;
  return SessionId{*session};
}

}  // namespace

void bindSession(nb::module_ &m) {
  SessionManager::global().setToolVersion(PROTON_VERSION);

  m.def(
      "start",
      [](const std::string &path, const std::string &context, const std::string &data,
         const std::string &backend, const std::string &mode) {
        SessionOptions options =
            valueOrThrow(parseSessionOptions(path, context, data, backend, mode));
        Result<StartResult> started = SessionManager::global().start(options);
        api::startDeferredInjection();  // CUDA initialised inside this start under `proton ./app`
        StartResult r = valueOrThrow(std::move(started));
        return std::make_tuple(r.id.value, r.created, r.warning);
      },
      nb::arg("path"), nb::arg("context"), nb::arg("data"), nb::arg("backend"), nb::arg("mode"),
      "Starts (or re-activates) the session writing to path; returns (id, created, warning).");
  m.def(
      "check_session_options",
      [](const std::string &path, const std::string &context, const std::string &data,
         const std::string &backend, const std::string &mode) {
        valueOrThrow(parseSessionOptions(path, context, data, backend, mode));
      },
      nb::arg("path"), nb::arg("context"), nb::arg("data"), nb::arg("backend"), nb::arg("mode"),
      "Raises what start() would for these options, without starting anything.");
  m.def(
      "activate",
      [](std::optional<int> s) { throwIfError(SessionManager::global().activate(toId(s))); },
      nb::arg("session").none());
  m.def(
      "deactivate",
      [](std::optional<int> s, bool flushing) {
        nb::gil_scoped_release release;
        throwIfError(SessionManager::global().deactivate(toId(s), flushing));
      },
      nb::arg("session").none(), nb::arg("flushing") = false);
  m.def(
      "finalize",
      [](std::optional<int> s, const std::string &format) {
        std::vector<std::string> written;
        Status status;
        {
          nb::gil_scoped_release release;
          status = SessionManager::global().finalize(toId(s), format, &written);
        }
        throwIfError(status);
        return written;
      },
      nb::arg("session").none(), nb::arg("output_format") = "",
      "Writes and drops the session(s); returns the paths written ('-' for stdout).");
  m.def("profiling_on", [] { return SessionManager::global().profilingOn(); });
  m.def("live_sessions", [] {
    std::vector<int> ids;
    for (SessionId id : SessionManager::global().liveSessions()) ids.push_back(id.value);
    return ids;
  });
  m.def("command_line_session", &api::commandLineSession,
        "The session the `proton` launcher owns in this process (the C++ API's too), or -1.");
  m.def("set_command_line_session", &api::setCommandLineSession, nb::arg("session"));
  m.def("set_command_line",
        [](std::string s) { SessionManager::global().setCommandLine(std::move(s)); });
  m.def(
      "set_program",
      [](std::string cwd, std::string script) {
        SessionManager::global().setProgram(std::move(cwd), std::move(script));
      },
      nb::arg("working_directory"), nb::arg("script"),
      "The working directory and main script written into profiles' metadata.");
  m.def("set_library_search_dirs", &setLibrarySearchDirs, nb::arg("dirs"),
        "Extra directories searched for vendor libraries (e.g. libcupti).");
  m.def(
      "stats", [] { return Stats::global().snapshot(); },
      "The stats table: (name, value) for every loss counter.");
  m.def("probe_gpu", [] {
    const RuntimeProbe &p = probeCudaRuntime();
    return std::make_tuple(p.available, p.deviceCount, p.reason);
  });
  m.def(
      "cupti_majors",
      [] {
#if PROTON_HAS_CUPTI
        return cupti::builtCuptiMajors();
#else
        return std::vector<int>{};
#endif
      },
      "The CUDA majors (12, 13) whose CUPTI this build has a backend for.");
}

}  // namespace proton::bindings
