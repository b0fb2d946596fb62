// Scopes, states and context depth: one crossing per scope entry and exit.
//
// Scope is the base of proton.scope (a context manager and, through the Python subclass, a
// decorator). When profiling is off, __enter__ and __exit__ cost one relaxed atomic load.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <memory>

#include "bindings/common.h"
#include "context/shadow_context.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton::bindings {
namespace {

struct Scope {
  nb::object name;
  nb::object metrics;  // None or a dict
  bool timed = false;
  uint32_t entered = 0;     // entries recorded and not yet exited (one object may nest)
  uint64_t generation = 0;  // profiling period of the entries; a later period dropped them
};

// A direct-mapped, per-thread cache from str object to StringId. It holds a reference to
// each cached str, so a cached address can never be reused by another object; scope names
// are usually literals, so this skips hashing the text on every entry and exit.
struct PyStrCache {
  static constexpr size_t kSize = 1024;
  struct Entry {
    PyObject *str = nullptr;
    StringId id;
  };
  Entry entries[kSize];
};

}  // namespace

StringId internName(nb::handle name) {
  thread_local PyStrCache cache;
  PyObject *str = name.ptr();
  PyStrCache::Entry &e = cache.entries[(reinterpret_cast<uintptr_t>(str) >> 4) % PyStrCache::kSize];
  if (PROTON_LIKELY(e.str == str)) return e.id;
  Py_ssize_t len;
  const char *s = PyUnicode_AsUTF8AndSize(str, &len);
  if (!s) throw nb::python_error();
  StringId id = StringTable::global().intern(std::string_view(s, len));
  Py_INCREF(str);
  Py_XDECREF(e.str);  // the GIL is held
  e.str = str;
  e.id = id;
  return id;
}

namespace {

void requireStr(nb::handle name, const char *what) {
  if (!PyUnicode_Check(name.ptr())) {
    throwIfError(invalidArgument(std::string("[PROTON] ") + what + " must be a str, got " +
                                 Py_TYPE(name.ptr())->tp_name));
  }
}

std::shared_ptr<const MetricList> sharedMetrics(nb::handle metrics,
                                                std::vector<TensorMetric> *tensors) {
  if (metrics.is_none()) return nullptr;
  MetricList list = toMetricList(metrics, tensors);
  if (list.empty()) return nullptr;
  return std::make_shared<const MetricList>(std::move(list));
}

// cpu_timed_scope: a distinct C++ type so that nanobind can register it as a subclass.
struct TimedScope : Scope {};

void initScope(Scope *self, nb::handle name, nb::handle metrics, bool timed) {
  requireStr(name, "scope name");
  if (!metrics.is_none() && !PyDict_Check(metrics.ptr()))
    toMetricList(metrics);  // raises the clear error for a non-dict
  if (timed && !metrics.is_none() && PyDict_Contains(metrics.ptr(), nb::str("cpu_time").ptr()))
    throwIfError(invalidArgument("[PROTON] The metric name 'cpu_time' is reserved."));
  new (self) Scope{nb::borrow(name), nb::borrow(metrics), timed, 0, 0};
}

}  // namespace

void bindScope(nb::module_ &m) {
  nb::class_<Scope>(m, "Scope")
      .def(
          "__init__",
          [](Scope *self, nb::handle name, nb::handle metrics) {
            initScope(self, name, metrics, false);
          },
          nb::arg("name").none(), nb::arg("metrics").none() = nb::none())
      .def_prop_ro("name", [](Scope &s) { return s.name; })
      .def_prop_ro("metrics", [](Scope &s) { return s.metrics; })
      .def("__enter__",
           [](nb::handle self) {
             Scope &s = *nb::inst_ptr<Scope>(self);
             if (!SessionManager::global().profilingOn()) return nb::borrow(self);
             std::vector<TensorMetric> tensors;
             std::shared_ptr<const MetricList> metrics = sharedMetrics(s.metrics, &tensors);
             throwIfError(SessionManager::global().enterScope(
                 internName(s.name), s.timed, std::move(metrics), nullptr,
                 tensors.empty() ? nullptr : &tensors));
             ++s.entered;
             s.generation = SessionManager::global().generation();
             return nb::borrow(self);
           })
      .def(
          "__exit__",
          [](Scope &s, nb::handle, nb::handle, nb::handle) {
            if (s.entered == 0) return false;
            --s.entered;
            if (s.generation != SessionManager::global().generation())
              return false;  // profiling restarted
            throwIfError(SessionManager::global().exitScope(internName(s.name), {}));
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc_value").none(), nb::arg("traceback").none());

  nb::class_<TimedScope, Scope>(m, "CpuTimedScope")
      .def(
          "__init__",
          [](TimedScope *self, nb::handle name, nb::handle metrics) {
            initScope(self, name, metrics, true);
          },
          nb::arg("name").none(), nb::arg("metrics").none() = nb::none());

  m.def(
      "enter_scope",
      [](nb::handle name, nb::handle metrics) -> int64_t {
        requireStr(name, "scope name");
        if (!SessionManager::global().profilingOn()) return -1;
        uint64_t id = 0;
        std::vector<TensorMetric> tensors;
        std::shared_ptr<const MetricList> list = sharedMetrics(metrics, &tensors);
        throwIfError(SessionManager::global().enterScope(
            internName(name), false, std::move(list), &id, tensors.empty() ? nullptr : &tensors));
        return static_cast<int64_t>(id);
      },
      nb::arg("name").none(), nb::arg("metrics").none() = nb::none());
  m.def(
      "exit_scope",
      [](nb::handle name, nb::handle metrics) -> int64_t {
        if (!name.is_none()) requireStr(name, "scope name");
        if (!SessionManager::global().profilingOn()) return -1;
        std::optional<StringId> id;
        if (!name.is_none()) id = internName(name);
        uint64_t scopeId = 0;
        std::vector<TensorMetric> tensors;
        MetricList list = toMetricList(metrics, &tensors);
        throwIfError(SessionManager::global().exitScope(id, list, &scopeId,
                                                        tensors.empty() ? nullptr : &tensors));
        return static_cast<int64_t>(scopeId);
      },
      nb::arg("name").none() = nb::none(), nb::arg("metrics").none() = nb::none());
  m.def(
      "enter_state",
      [](nb::handle name) {
        requireStr(name, "state name");
        SessionManager::global().enterState(internName(name));
      },
      nb::arg("name").none());
  m.def("exit_state", [] { SessionManager::global().exitState(); });

  // Thread inheritance: proton wraps threading.Thread.start so that the new thread adopts
  // the stack its starting thread had at start().
  nb::class_<ContextSnapshot>(m, "ContextSnapshot");
  m.def("capture_context", [] { return ThreadContext::current().capture(); });
  m.def(
      "adopt_context",
      [](const ContextSnapshot &snapshot) { ThreadContext::current().adopt(snapshot); },
      nb::arg("snapshot"));
  m.def(
      "depth",
      [](int session) { return valueOrThrow(SessionManager::global().depth(SessionId{session})); },
      nb::arg("session"));
}

}  // namespace proton::bindings
