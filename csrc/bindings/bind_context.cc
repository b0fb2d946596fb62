// context="python" and launch metadata (hook="triton"): installs the CPython frame walker,
// and hands what the Triton launch hook evaluated to the core for the next kernel.
//
// The hook's per-launch calls (push/pop_launch_metadata, enter_metadata_state,
// restore_state) reuse thread-local buffers: no allocation per launch in steady state.
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

// Numeric values of a launch-metadata dict as metrics (int stays int, float stays float);
// anything else was already dropped by the Python layer and is ignored here.
const MetricList &launchMetrics(nb::handle metrics, std::vector<TensorMetric> &tensors) {
  thread_local MetricList list;
  thread_local std::unordered_map<uint32_t, MetricSpec> specs;  // by interned raw name
  list.clear();
  tensors.clear();
  if (metrics.is_none()) return list;
  if (!PyDict_Check(metrics.ptr()))
    throwIfError(invalidArgument("[PROTON] launch metadata metrics must be a dict"));
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(metrics.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) continue;
    MetricValue v;
    if (PyLong_Check(value)) {
      int overflow = 0;
      long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow) continue;
      v = static_cast<int64_t>(n);
    } else if (PyFloat_Check(value)) {
      v = PyFloat_AS_DOUBLE(value);
    } else if (looksLikeTensor(value)) {
      const char *raw = PyUnicode_AsUTF8(key);
      if (!raw) throw nb::python_error();
      // A device tensor is copied at push; a CPU one is a host value like the numbers.
      if (!tensorValue(raw, nb::handle(value), tensors, MetricSpec::parse(raw), v)) continue;
    } else {
      continue;
    }
    StringId raw = internName(key);
    auto it = specs.find(raw.value);
    if (it == specs.end())
      it = specs.emplace(raw.value, MetricSpec::parse(StringTable::global().view(raw))).first;
    list.push_back(NamedMetric{it->second, std::move(v)});
  }
  return list;
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

  m.def(
      "push_launch_metadata",
      [](nb::handle name, nb::handle metrics) {
        if (!SessionManager::global().profilingOn()) return;
        thread_local std::vector<TensorMetric> tensors;
        const MetricList &list = launchMetrics(metrics, tensors);
        SessionManager::global().pushLaunchMetadata(internName(name), list,
                                                    tensors.empty() ? nullptr : &tensors);
      },
      nb::arg("name"), nb::arg("metrics").none(),
      "The next kernel this thread launches is named `name` and gets `metrics`.");
  m.def("pop_launch_metadata", [] { SessionManager::global().popLaunchMetadata(); });
  m.def(
      "enter_metadata_state",
      [](nb::handle kernel) -> uint64_t {
        static const StringId state = StringTable::global().intern(kMetadataStateName);
        StringId detail = PyUnicode_Check(kernel.ptr()) ? internName(kernel) : StringId{};
        StateTag previous = SessionManager::global().exchangeState({state, detail});
        return uint64_t(previous.name.value) | (uint64_t(previous.detail.value) << 32);
      },
      nb::arg("kernel").none() = nb::none(),
      "Sets the state to __proton_launch_metadata/<kernel> (kernel: the name of the kernel "
      "whose metadata is evaluated; None: no such frame); returns the previous state for "
      "restore_state.");
  m.def(
      "restore_state",
      [](uint64_t previous) {
        SessionManager::global().exchangeState({StringId{static_cast<uint32_t>(previous)},
                                                StringId{static_cast<uint32_t>(previous >> 32)}});
      },
      nb::arg("previous"));
}

}  // namespace proton::bindings
