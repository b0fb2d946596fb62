// context="python" and launch metadata (hook="triton"): installs the CPython frame walker,
// and hands what the Triton launch hook evaluated to the core for the next kernel.
//
// The hook's per-launch calls (enter_launch_metadata, pop_launch_metadata) are Triton's hooks
// themselves, with no Python frame between, and reuse thread-local buffers: no allocation per
// launch in steady state.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "bindings/common.h"
#include "context/cpython_frames.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton::bindings {
namespace {

constexpr const char *kMetadataStateName = SessionManager::kMetadataScopeName;

// How one entry of an evaluated launch-metadata dict is filed (what triton.profiler's hook
// keeps): numbers become metrics, a tensor a tensor metric; Triton's own keys and anything
// else are skipped.
enum class MetadataValue { kSkip, kNumber, kTensor };

// Interned once (leaked on purpose, as the interpreter's own are): attribute and key lookups
// with them hash nothing and allocate nothing.
PyObject *internedStr(const char *s) {
  PyObject *str = PyUnicode_InternFromString(s);
  if (!str) throw nb::python_error();
  return str;
}

bool isReservedKey(PyObject *key) {
  static PyObject *const reserved[] = {internedStr("name"), internedStr("function"),
                                       internedStr("stream")};
  for (PyObject *r : reserved)
    if (key == r) return true;
  // An interned key equal to one of them would be that very object (keys written in the
  // source are interned): only other keys need comparing.
  if (PyUnicode_CHECK_INTERNED(key)) return false;
  for (PyObject *r : reserved)
    if (PyUnicode_Compare(key, r) == 0) return true;
  return false;
}

// numbers.Integral / numbers.Real (numpy scalars, Fraction): looked up once, leaked on
// purpose (a static nb::object would be released after the interpreter is gone).
bool isInstanceOfNumbers(PyObject *value, const char *abc) {
  static PyObject *integral = nullptr, *real = nullptr;
  if (!integral) {
    nb::module_ numbers = nb::module_::import_("numbers");
    integral = nb::object(numbers.attr("Integral")).release().ptr();
    real = nb::object(numbers.attr("Real")).release().ptr();
  }
  int r = PyObject_IsInstance(value, abc[0] == 'I' ? integral : real);
  if (r < 0) throw nb::python_error();
  return r == 1;
}

MetadataValue classifyMetadata(PyObject *key, PyObject *value, MetricValue &out) {
  if (!PyUnicode_Check(key) || isReservedKey(key)) return MetadataValue::kSkip;
  if (PyLong_Check(value)) {  // bool included: True is 1
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) return MetadataValue::kSkip;
    out = static_cast<int64_t>(n);
    return MetadataValue::kNumber;
  }
  if (PyFloat_Check(value)) {
    out = PyFloat_AS_DOUBLE(value);
    return MetadataValue::kNumber;
  }
  if (value == Py_None || PyUnicode_Check(value) || PyTuple_Check(value) || PyList_Check(value) ||
      PyDict_Check(value))
    return MetadataValue::kSkip;
  if (looksLikeTensor(value)) return MetadataValue::kTensor;
  if (isInstanceOfNumbers(value, "Integral")) {
    nb::object n = nb::steal(PyNumber_Index(value));
    if (!n.is_valid()) throw nb::python_error();
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
    if (overflow) return MetadataValue::kSkip;
    out = static_cast<int64_t>(v);
    return MetadataValue::kNumber;
  }
  if (isInstanceOfNumbers(value, "Real")) {
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
    out = v;
    return MetadataValue::kNumber;
  }
  return MetadataValue::kSkip;
}

PyObject *checkedDict(nb::handle data) {
  if (!PyDict_Check(data.ptr()))
    throwIfError(invalidArgument("[PROTON] launch metadata must be a dict"));
  return data.ptr();
}

// The metrics of an evaluated launch-metadata dict, into thread-local buffers (no allocation
// per launch in steady state).
const MetricList &launchMetrics(nb::handle data, std::vector<TensorMetric> &tensors) {
  thread_local MetricList list;
  thread_local std::unordered_map<uint32_t, MetricSpec> specs;  // by interned raw name
  list.clear();
  tensors.clear();
  if (data.is_none()) return list;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  PyObject *dict = checkedDict(data);
  while (PyDict_Next(dict, &pos, &key, &value)) {
    MetricValue v;
    MetadataValue kind = classifyMetadata(key, value, v);
    if (kind == MetadataValue::kSkip) continue;
    if (kind == MetadataValue::kTensor) {
      const char *raw = PyUnicode_AsUTF8(key);
      if (!raw) throw nb::python_error();
      // A device tensor is copied at push; a CPU one is a host value like the numbers.
      if (!tensorValue(raw, nb::handle(value), tensors, MetricSpec::parse(raw), v)) continue;
    }
    StringId raw = internName(key);
    auto it = specs.find(raw.value);
    if (it == specs.end())
      it = specs.emplace(raw.value, MetricSpec::parse(StringTable::global().view(raw))).first;
    list.push_back(NamedMetric{it->second, std::move(v)});
  }
  return list;
}

// kernel: the launched kernel's own name, whose metadata `data` is (0: unknown).
void pushLaunchMetadata(nb::handle name, nb::handle data, StringId kernel = StringId{}) {
  if (!SessionManager::global().profilingOn()) return;
  thread_local std::vector<TensorMetric> tensors;
  const MetricList &list = launchMetrics(data, tensors);
  SessionManager::global().pushLaunchMetadata(internName(name), list,
                                              tensors.empty() ? nullptr : &tensors, kernel);
}

// Set while this thread evaluates a launch-metadata function: kernels it launches get no
// metadata of their own.
thread_local bool evaluatingMetadata = false;

// The launch hook's per-thread and per-process state, as triton.profiler keeps it: the
// ContextVars hooks.launch.id and hooks.launch.op_name, the next launch id, and the kernel
// name filter (LaunchHook.matches, or null for none). Set by LaunchHook.configure; the
// references are held for the life of the process.
struct LaunchHookState {
  PyObject *idVar = nullptr;
  PyObject *opNameVar = nullptr;
  PyObject *matches = nullptr;
  uint64_t nextId = 1;  // the GIL orders the launches that take one
};
LaunchHookState launchHook;

void setContextVar(PyObject *var, PyObject *value) {
  if (!var) return;
  PyObject *token = PyContextVar_Set(var, value);
  if (!token) throw nb::python_error();
  Py_DECREF(token);
}

bool passesFilter(nb::handle name) {
  if (!launchHook.matches) return true;
  nb::object ok = nb::steal(PyObject_CallOneArg(launchHook.matches, name.ptr()));
  if (!ok.is_valid()) throw nb::python_error();
  int truth = PyObject_IsTrue(ok.ptr());
  if (truth < 0) throw nb::python_error();
  return truth == 1;
}

// The attribute "get" (LazyDict.get, dict.get), interned.
PyObject *getAttrName() {
  static PyObject *const get = internedStr("get");
  return get;
}

// data.get("name"): a dict's item without a Python call.
nb::object nameOf(nb::handle data) {
  static PyObject *const nameKey = internedStr("name");
  if (PyDict_CheckExact(data.ptr())) {
    PyObject *name = PyDict_GetItemWithError(data.ptr(), nameKey);  // borrowed
    if (!name && PyErr_Occurred()) throw nb::python_error();
    return name ? nb::borrow(name) : nb::none();
  }
  return data.attr(getAttrName())(nb::handle(nameKey));
}

// One launch's metadata (Triton's enter hook): the state becomes
// __proton_launch_metadata/<kernel> while the metadata function runs, hooks.launch.id and
// op_name are set, and the evaluated name and metrics go to the core for the next kernel.
// A kernel launched by the metadata function itself gets nothing (evaluatingMetadata).
void enterLaunchMetadata(nb::handle metadata) {
  // Triton's LazyDict holds the kernel's own name in .data before anything is evaluated.
  static PyObject *const dataAttr = internedStr("data");
  nb::object lazy = nb::getattr(metadata, dataAttr, nb::none());
  nb::object kernel = lazy.is_none() ? nb::none() : nameOf(lazy);
  if (!lazy.is_none() && !passesFilter(kernel)) return;
  if (evaluatingMetadata) return;
  static const StringId state = StringTable::global().intern(kMetadataStateName);
  StringId detail = PyUnicode_CheckExact(kernel.ptr()) ? internName(kernel) : StringId{};
  StateTag previous = SessionManager::global().exchangeState({state, detail});
  evaluatingMetadata = true;
  auto restore = [&] {
    evaluatingMetadata = false;
    SessionManager::global().exchangeState(previous);
  };
  try {
    nb::object id = nb::steal(PyLong_FromUnsignedLongLong(launchHook.nextId++));
    if (!id.is_valid()) throw nb::python_error();
    setContextVar(launchHook.idVar, id.ptr());
    setContextVar(launchHook.opNameVar, kernel.ptr());
    nb::object data =
        PyDict_Check(metadata.ptr()) ? nb::borrow(metadata) : metadata.attr(getAttrName())();
    nb::object name = nameOf(data);
    setContextVar(launchHook.opNameVar, name.ptr());
    restore();
    if (PyUnicode_Check(name.ptr()) && passesFilter(name)) pushLaunchMetadata(name, data, detail);
  } catch (...) {
    if (evaluatingMetadata) restore();
    throw;
  }
}

nb::str viewToStr(StringId id) {
  std::string_view v = StringTable::global().view(id);
  return nb::str(v.data(), v.size());
}

nb::object metricToPython(const MetricValue &v) {
  if (const int64_t *i = std::get_if<int64_t>(&v)) return nb::int_(*i);
  if (const double *d = std::get_if<double>(&v)) return nb::float_(*d);
  if (const std::string *s = std::get_if<std::string>(&v)) return nb::str(s->c_str());
  nb::list values;
  for (double d : std::get<std::vector<double>>(v)) values.append(nb::float_(d));
  return values;
}

// fn() with the GIL held, or released around it (what a launch inside a torch operator sees).
template <typename Fn>
auto withGilOrWithout(bool releaseGil, Fn fn) {
  if (!releaseGil) return fn();
  nb::gil_scoped_release released;
  return fn();
}

}  // namespace

void bindContext(nb::module_ &m) {
  m.def(
      "install_python_context",
      [](std::vector<std::string> skipPrefixes, bool acquireGil,
         std::vector<std::string> skipFiles) {
        installCPythonFrameWalker(std::move(skipPrefixes), acquireGil, std::move(skipFiles));
      },
      nb::arg("skip_prefixes"), nb::arg("acquire_gil") = true,
      nb::arg("skip_files") = std::vector<std::string>(),
      "Registers the CPython frame walker; frames in files under skip_prefixes, or in one of "
      "skip_files exactly, are left out.");
  m.def(
      "python_stack_names",
      [](bool releaseGil) { return withGilOrWithout(releaseGil, &cpythonStackNames); },
      nb::arg("release_gil") = false,
      "The calling thread's stack as context='python' files it, captured with the GIL held or "
      "released, as a launch inside a torch operator is (for tests).");
  m.def(
      "python_stack_key",
      [](bool releaseGil) { return withGilOrWithout(releaseGil, &cpythonStackKey); },
      nb::arg("release_gil") = false,
      "An id of the calling thread's interned stack: equal stacks, equal ids (for tests).");
  m.def("python_stacks_seen_without_gil", &cpythonStacksSeenWithoutGil,
        "Captures of the calling thread that found their stack without taking the GIL back.");

  m.def(
      "push_launch_metadata",
      [](nb::handle name, nb::handle data) { pushLaunchMetadata(name, data); }, nb::arg("name"),
      nb::arg("data").none(),
      "The next kernel this thread launches is named `name` and gets the metrics of `data` "
      "(an evaluated launch-metadata dict, see launch_metrics_of).");
  // Takes (and ignores) Triton's launch metadata, so that it can be the exit hook itself.
  m.def(
      "pop_launch_metadata", [](nb::handle) { SessionManager::global().popLaunchMetadata(); },
      nb::arg("metadata").none() = nb::none(),
      "Drops metadata pushed for a launch that did not happen (the launch's exit hook).");
  m.def(
      "launch_metrics_of",
      [](nb::handle data) {
        nb::dict out;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        PyObject *dict = checkedDict(data);
        while (PyDict_Next(dict, &pos, &key, &value)) {
          MetricValue v;
          switch (classifyMetadata(key, value, v)) {
            case MetadataValue::kSkip:
              break;
            case MetadataValue::kTensor:
              out[key] = nb::handle(value);
              break;
            case MetadataValue::kNumber:
              out[key] = metricToPython(v);
              break;
          }
        }
        return out;
      },
      nb::arg("data"),
      "The metrics push_launch_metadata takes from an evaluated launch-metadata dict: numbers "
      "(bool as int, numbers.Integral/Real converted) and tensors; never name/function/stream.");
  m.def("enter_launch_metadata", &enterLaunchMetadata, nb::arg("metadata"),
        "Triton's launch enter hook: evaluates the launch's metadata (see hooks/launch.py) and "
        "hands its name and metrics to the core for the kernel Triton launches next.");
  m.def(
      "configure_launch_hook",
      [](nb::handle idVar, nb::handle opNameVar, nb::handle matches) {
        for (auto [slot, value] :
             {std::pair{&launchHook.idVar, idVar}, std::pair{&launchHook.opNameVar, opNameVar},
              std::pair{&launchHook.matches, matches}}) {
          PyObject *next = value.is_none() ? nullptr : value.inc_ref().ptr();
          Py_XDECREF(*slot);
          *slot = next;
        }
      },
      nb::arg("id_var").none(), nb::arg("op_name_var").none(), nb::arg("matches").none(),
      "The ContextVars enter_launch_metadata sets (hooks.launch.id and op_name) and the kernel "
      "name filter it applies before and after evaluation (None: every kernel).");
  m.def(
      "pending_launch_metadata",
      []() -> nb::object {
        StringId name;
        MetricList metrics;
        if (!SessionManager::global().pendingLaunchMetadata(name, metrics)) return nb::none();
        nb::dict out;
        for (const NamedMetric &m : metrics) out[viewToStr(m.spec.name)] = metricToPython(m.value);
        return nb::make_tuple(viewToStr(name), out);
      },
      "(name, metrics) that this thread's next kernel launch would get from launch metadata, "
      "or None (for tests).");
}

}  // namespace proton::bindings
