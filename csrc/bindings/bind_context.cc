// context="python" and launch metadata (hook="triton"): installs the CPython frame walker,
// and hands what the Triton launch hook evaluated to the core for the next kernel.
//
// The hook's per-launch calls (begin/end_launch_metadata, pop_launch_metadata) reuse
// thread-local buffers: no allocation per launch in steady state.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "bindings/common.h"
#include "context/cpython_frames.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton::bindings {
namespace {

constexpr const char *kMetadataStateName = "__proton_launch_metadata";

// How one entry of an evaluated launch-metadata dict is filed (what triton.profiler's hook
// keeps): numbers become metrics, a tensor a tensor metric; Triton's own keys and anything
// else are skipped.
enum class MetadataValue { kSkip, kNumber, kTensor };

bool isReservedKey(PyObject *key) {
  for (const char *reserved : {"name", "function", "stream"})
    if (PyUnicode_CompareWithASCIIString(key, reserved) == 0) return true;
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

void pushLaunchMetadata(nb::handle name, nb::handle data) {
  if (!SessionManager::global().profilingOn()) return;
  thread_local std::vector<TensorMetric> tensors;
  const MetricList &list = launchMetrics(data, tensors);
  SessionManager::global().pushLaunchMetadata(internName(name), list,
                                              tensors.empty() ? nullptr : &tensors);
}

// Set while this thread evaluates a launch-metadata function: kernels it launches get no
// metadata of their own.
thread_local bool evaluatingMetadata = false;

StateTag unpackState(uint64_t packed) {
  return {StringId{static_cast<uint32_t>(packed)}, StringId{static_cast<uint32_t>(packed >> 32)}};
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
  m.def("python_stack_names", &cpythonStackNames,
        "The calling thread's stack as context='python' files it (for tests).");
  m.def("python_stack_key", &cpythonStackKey,
        "An id of the calling thread's interned stack: equal stacks, equal ids (for tests).");

  m.def("push_launch_metadata", &pushLaunchMetadata, nb::arg("name"), nb::arg("data").none(),
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
              if (const int64_t *i = std::get_if<int64_t>(&v))
                out[key] = nb::int_(*i);
              else
                out[key] = nb::float_(std::get<double>(v));
              break;
          }
        }
        return out;
      },
      nb::arg("data"),
      "The metrics push_launch_metadata takes from an evaluated launch-metadata dict: numbers "
      "(bool as int, numbers.Integral/Real converted) and tensors; never name/function/stream.");
  m.def(
      "begin_launch_metadata",
      [](nb::handle kernel) -> nb::object {
        if (evaluatingMetadata) return nb::none();
        static const StringId state = StringTable::global().intern(kMetadataStateName);
        StringId detail = PyUnicode_Check(kernel.ptr()) ? internName(kernel) : StringId{};
        StateTag previous = SessionManager::global().exchangeState({state, detail});
        evaluatingMetadata = true;
        return nb::int_(uint64_t(previous.name.value) | (uint64_t(previous.detail.value) << 32));
      },
      nb::arg("kernel").none() = nb::none(),
      "Before a launch's metadata function runs: sets the state to "
      "__proton_launch_metadata/<kernel> and returns the previous one for end_launch_metadata; "
      "None when this thread is already evaluating one (a kernel launched by it).");
  m.def(
      "end_launch_metadata",
      [](uint64_t previous, nb::handle name, nb::handle data) {
        evaluatingMetadata = false;
        SessionManager::global().exchangeState(unpackState(previous));
        if (PyUnicode_Check(name.ptr())) pushLaunchMetadata(name, data);
      },
      nb::arg("previous"), nb::arg("name").none(), nb::arg("data").none(),
      "After the metadata function: restores the state begin_launch_metadata returned and, "
      "when name is a str, pushes name and data's metrics for the next kernel.");
}

}  // namespace proton::bindings
