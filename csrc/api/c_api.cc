// The C ABI behind proton/proton.h: each function turns its arguments into the core's types,
// calls the session manager and turns a failed status into -1 plus a per-thread message.
// Nothing throws out of here (a C caller cannot catch).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/injection.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "proton/proton.h"
#include "runtime/session_manager.h"

namespace proton::api {
namespace {

thread_local std::string tLastError;

int fail(const Status &status) {
  tLastError = status.message();
  return -1;
}

int fail(const std::string &message) {
  tLastError = message;
  return -1;
}

const char *orEmpty(const char *s) { return s ? s : ""; }

std::optional<SessionId> toId(int session) {
  if (session < 0) return std::nullopt;
  return SessionId{session};
}

Result<MetricList> toMetricList(const proton_metric *metrics, size_t count) {
  MetricList list;
  if (count && !metrics) return invalidArgument("[PROTON] metrics is NULL with a count");
  list.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const proton_metric &m = metrics[i];
    if (!m.name || !m.name[0]) return invalidArgument("[PROTON] a metric has no name");
    MetricValue value;
    switch (m.kind) {
      case PROTON_METRIC_INT:
        value = m.int_value;
        break;
      case PROTON_METRIC_DOUBLE:
        value = m.double_value;
        break;
      case PROTON_METRIC_STRING:
        value = std::string(orEmpty(m.string_value));
        break;
      default:
        return invalidArgument("[PROTON] metric '" + std::string(m.name) + "' has unknown kind " +
                               std::to_string(m.kind));
    }
    list.push_back(NamedMetric{MetricSpec::parse(m.name), std::move(value)});
  }
  return list;
}

// Under the `proton` launcher, session 0 belongs to the command line (as in Python).
Status guardCommandLine(int session, const char *action) {
  int owned = commandLineSession();
  if (owned < 0 || session == owned) return {};
  return invalidArgument(std::string("[PROTON] Only one session can ") + action +
                         " when running from the command line.");
}

// Under `proton ./app`, the program's first scope or state may come before CUDA initialises:
// the command line's session then starts here, so that scopes around the program's first CUDA
// calls are recorded. Off the launcher this is one load of a static.
bool startForLauncher() {
  static const bool launched = launchedByProton(getenv);
  if (!launched || commandLineSession() >= 0) return false;  // not ours, or started already
  return startInjectedSession(false) >= 0;
}

// Scope calls that failed: the RAII guard ignores its result, so they are counted here.
int scopeFailed(int rc) {
  static Counter &errors = Stats::global().counter("api_scope_errors");
  if (rc < 0) errors.add();
  return rc;
}

template <typename F>
int guarded(F &&f) noexcept {
  try {
    return f();
  } catch (const std::exception &e) {
    return fail(std::string("[PROTON] ") + e.what());
  } catch (...) {
    return fail("[PROTON] unknown error");
  }
}

}  // namespace
}  // namespace proton::api

using namespace proton;
using namespace proton::api;

extern "C" {

int proton_start(const char *name, const char *context, const char *data, const char *backend,
                 const char *mode) {
  return guarded([&] {
    if (commandLineSession() >= 0) return commandLineSession();
    if (launchedByProton(getenv)) {
      int id = startInjectedSession(false);
      return id >= 0 ? id : fail("[PROTON] the command line's session could not start");
    }
    Result<SessionOptions> options =
        parseSessionOptions(name && name[0] ? name : "proton", context ? context : "shadow",
                            data ? data : "tree", orEmpty(backend), orEmpty(mode));
    if (!options.isOk()) return fail(options.status());
    SessionManager &manager = SessionManager::global();
    manager.setToolVersion(PROTON_VERSION);
    Result<StartResult> started = manager.start(options.value());
    startDeferredInjection();
    if (!started.isOk()) return fail(started.status());
    if (!started.value().warning.empty() && started.value().created)
      std::fprintf(stderr, "%s\n", started.value().warning.c_str());
    return static_cast<int>(started.value().id.value);
  });
}

int proton_finalize(int session, const char *format) {
  return guarded([&] {
    if (commandLineSession() >= 0) {  // the command line writes it when the program ends
      Status status =
          guardCommandLine(session < 0 ? commandLineSession() : session, "be finalized");
      return status.isOk() ? 0 : fail(status);
    }
    std::vector<std::string> written;
    Status status = SessionManager::global().finalize(toId(session), orEmpty(format), &written);
    return status.isOk() ? 0 : fail(status);
  });
}

int proton_activate(int session) {
  return guarded([&] {
    Status status = guardCommandLine(session, "be activated");
    if (status.isOk() || session < 0) status = SessionManager::global().activate(toId(session));
    return status.isOk() ? 0 : fail(status);
  });
}

int proton_deactivate(int session) {
  return guarded([&] {
    Status status = guardCommandLine(session, "be deactivated");
    if (status.isOk() || session < 0)
      status = SessionManager::global().deactivate(toId(session), false);
    return status.isOk() ? 0 : fail(status);
  });
}

int proton_enter_scope(const char *name, const proton_metric *metrics, size_t count) {
  SessionManager &manager = SessionManager::global();
  if (!manager.profilingOn() && !startForLauncher()) return 0;
  return scopeFailed(guarded([&] {
    if (!name) return fail("[PROTON] scope name is NULL");
    std::shared_ptr<const MetricList> list;
    if (count) {
      Result<MetricList> parsed = toMetricList(metrics, count);
      if (!parsed.isOk()) return fail(parsed.status());
      list = std::make_shared<const MetricList>(std::move(parsed.value()));
    }
    Status status = manager.enterScope(StringTable::global().intern(name), false, std::move(list));
    return status.isOk() ? 0 : fail(status);
  }));
}

int proton_exit_scope(const char *name, const proton_metric *metrics, size_t count) {
  SessionManager &manager = SessionManager::global();
  if (!manager.profilingOn()) return 0;
  return scopeFailed(guarded([&] {
    MetricList list;
    if (count) {
      Result<MetricList> parsed = toMetricList(metrics, count);
      if (!parsed.isOk()) return fail(parsed.status());
      list = std::move(parsed.value());
    }
    std::optional<StringId> id;
    if (name) id = StringTable::global().intern(name);
    Status status = manager.exitScope(id, list);
    return status.isOk() ? 0 : fail(status);
  }));
}

int proton_enter_state(const char *name) {
  return guarded([&] {
    if (!name) return fail("[PROTON] state name is NULL");
    if (!SessionManager::global().profilingOn()) startForLauncher();
    SessionManager::global().enterState(StringTable::global().intern(name));
    return 0;
  });
}

int proton_exit_state(void) {
  return guarded([&] {
    SessionManager::global().exitState();
    return 0;
  });
}

int proton_profiling_on(void) {
  return SessionManager::global().profilingOn() || startForLauncher() ? 1 : 0;
}

uint64_t proton_generation(void) { return SessionManager::global().generation(); }

int proton_depth(int session) {
  return guarded([&] {
    if (session < 0) return fail("[PROTON] depth needs a session id");
    Result<size_t> d = SessionManager::global().depth(SessionId{session});
    return d.isOk() ? static_cast<int>(d.value()) : fail(d.status());
  });
}

const char *proton_last_error(void) { return tLastError.c_str(); }

int proton_command_line_session(void) { return commandLineSession(); }

}  // extern "C"
