// Module frames from CPython's sys.monitoring (3.12 and later), without module hooks: PY_START
// and PY_RETURN of one code object, the framework's module-call function
// (torch.nn.Module._call_impl), and PY_UNWIND (a global event, raised only while an exception
// unwinds) reach the three C callables below. Each reads the module from the frame's `self`,
// names it relative to the module whose call encloses it, and pushes or pops its frame
// (enterModuleFrame / exitModuleFrame), as the hooks did. Global module hooks send every
// module call down PyTorch's slow path (about 1.7 us a call) and run two Python functions;
// these events cost two C calls on the fast path.
//
//   _C.set_module_events(Module._call_impl.__code__, frame_name)   # adapter, at start
//   sys.monitoring.register_callback(tool, PY_START, _C.module_call_start) ...
//   _C.set_module_events(None, None)                                # at stop
//
// A name is asked of the adapter (frame_name(parent, module) -> str) once per (parent, module)
// pair and cached, checked by weak references so that a module allocated where a freed one was
// is named again.
//
// Threading: every function runs with the GIL held (CPython calls the callbacks from the
// interpreter); the per-thread stack of open calls is thread-local.
#include <Python.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "bindings/common.h"
#include "core/string_table.h"
#include "runtime/framework_frames.h"

namespace proton::bindings {
namespace {

// The name cache and the callbacks' state are guarded by the GIL: a free-threaded build keeps
// the hooks.
#if PY_VERSION_HEX >= 0x030C0000 && !defined(Py_GIL_DISABLED)
#define PROTON_MODULE_EVENTS 1
constexpr bool kMonitoring = true;
#else
constexpr bool kMonitoring = false;
#endif

// Guarded by the GIL.
PyObject *callCode = nullptr;  // the module-call function's code object (strong)
PyObject *namer = nullptr;     // frame_name(parent, module) -> str (strong)
PyObject *selfString = nullptr;
uint64_t generation = 0;  // moves at every set_module_events: open calls from before are stale

struct NameEntry {
  PyObject *parentRef = nullptr;  // weak references (strong references to the weakref objects);
  PyObject *moduleRef = nullptr;  // parentRef is null for the outermost module
  StringId name;
};
struct PairHash {
  size_t operator()(const std::pair<PyObject *, PyObject *> &k) const {
    return std::hash<uintptr_t>()(reinterpret_cast<uintptr_t>(k.first) * 31 +
                                  reinterpret_cast<uintptr_t>(k.second));
  }
};
constexpr size_t kMaxNames = size_t(1) << 16;
std::unordered_map<std::pair<PyObject *, PyObject *>, NameEntry, PairHash> names;

void clearNames() {
  for (auto &[key, entry] : names) {
    Py_XDECREF(entry.parentRef);
    Py_XDECREF(entry.moduleRef);
  }
  names.clear();
}

struct OpenCall {
  PyObject *frame;   // the call's frame object (borrowed: identity only)
  PyObject *module;  // its module (borrowed: the frame holds it)
};
struct ThreadCalls {
  std::vector<OpenCall> open;
  uint64_t generation = 0;
};

ThreadCalls &threadCalls() {
  thread_local ThreadCalls calls;
  if (calls.generation != generation) {  // calls opened under an earlier registration
    calls.open.clear();
    calls.generation = generation;
  }
  return calls;
}

bool refersTo(PyObject *ref, PyObject *object) {
  if (!ref) return false;
#if PY_VERSION_HEX >= 0x030D0000
  PyObject *target = nullptr;
  if (PyWeakref_GetRef(ref, &target) < 0) {
    PyErr_Clear();
    return false;
  }
  Py_XDECREF(target);  // compared by address only; `object` is alive (a frame holds it)
  return target == object;
#else
  return PyWeakref_GetObject(ref) == object;  // borrowed; Py_None once it died
#endif
}

// The frame name of `module` called inside `parent` (null: outermost). Null with a Python error
// set when the adapter's namer failed.
bool nameOf(PyObject *parent, PyObject *module, StringId &out) {
  auto key = std::make_pair(parent, module);
  auto it = names.find(key);
  if (it != names.end() && refersTo(it->second.moduleRef, module) &&
      (!parent || refersTo(it->second.parentRef, parent))) {
    out = it->second.name;
    return true;
  }
  PyObject *text = PyObject_CallFunctionObjArgs(namer, parent ? parent : Py_None, module, nullptr);
  if (!text) return false;
  Py_ssize_t n = 0;
  const char *s = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &n) : nullptr;
  if (!s) {
    Py_DECREF(text);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "frame name is not a str");
    return false;
  }
  out = StringTable::global().intern(std::string_view(s, static_cast<size_t>(n)));
  Py_DECREF(text);
  PyObject *moduleRef = PyWeakref_NewRef(module, nullptr);
  PyObject *parentRef = parent ? PyWeakref_NewRef(parent, nullptr) : nullptr;
  if (!moduleRef || (parent && !parentRef)) {  // not weakly referenceable: named every call
    PyErr_Clear();
    Py_XDECREF(moduleRef);
    Py_XDECREF(parentRef);
    return true;
  }
  if (it != names.end()) {
    Py_XDECREF(it->second.parentRef);
    Py_XDECREF(it->second.moduleRef);
    it->second = NameEntry{parentRef, moduleRef, out};
    return true;
  }
  if (names.size() >= kMaxNames) clearNames();
  try {
    names.emplace(key, NameEntry{parentRef, moduleRef, out});
  } catch (...) {  // out of memory: named, not cached
    Py_XDECREF(moduleRef);
    Py_XDECREF(parentRef);
  }
  return true;
}

// A failure inside a callback must not reach the user's program (an exception raised by a
// monitoring callback propagates into the monitored code): it is reported once as a warning
// and the module gets no frame.
void reportOnce() {
  static bool reported = false;
  if (reported) {
    PyErr_Clear();
    return;
  }
  reported = true;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyObject *text = value ? PyObject_Str(value) : nullptr;
  const char *message = text ? PyUnicode_AsUTF8(text) : nullptr;
  PyErr_Clear();
  std::string warning = "[PROTON] context='torch': a module frame could not be named (";
  warning += message ? message : "unknown error";
  warning += "); such modules get no frame";
  if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) != 0) PyErr_Clear();
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
}

PyObject *callStartUnguarded(PyObject *const *args, Py_ssize_t nargs) {
#ifdef PROTON_MODULE_EVENTS
  if (!namer || nargs < 1 || args[0] != callCode) Py_RETURN_NONE;
  PyFrameObject *frame = PyEval_GetFrame();
  if (!frame) Py_RETURN_NONE;
  PyObject *module = PyFrame_GetVar(frame, selfString);  // new reference
  if (!module) {
    reportOnce();
    Py_RETURN_NONE;
  }
  ThreadCalls &calls = threadCalls();
  PyObject *parent = calls.open.empty() ? nullptr : calls.open.back().module;
  StringId name;
  bool named = nameOf(parent, module, name);
  Py_DECREF(module);  // the frame keeps it alive until the call returns
  if (!named) {
    reportOnce();
    Py_RETURN_NONE;
  }
  try {
    calls.open.push_back(OpenCall{reinterpret_cast<PyObject *>(frame), module});
  } catch (...) {
    Py_RETURN_NONE;  // out of memory: no frame
  }
  enterModuleFrame(name);
#else
  (void)args;
  (void)nargs;
#endif
  Py_RETURN_NONE;
}

// PY_RETURN (code, offset, value) and PY_UNWIND (code, offset, exception): the call whose frame
// is the current one ends, with the calls opened above it (their ends were not seen).
PyObject *callEndUnguarded(PyObject *const *args, Py_ssize_t nargs) {
  if (!callCode || nargs < 1 || args[0] != callCode) Py_RETURN_NONE;
  ThreadCalls &calls = threadCalls();
  if (calls.open.empty()) Py_RETURN_NONE;
  PyObject *frame = reinterpret_cast<PyObject *>(PyEval_GetFrame());
  size_t i = calls.open.size();
  while (i > 0 && calls.open[i - 1].frame != frame) --i;
  if (i == 0) Py_RETURN_NONE;  // opened before these events were on
  while (calls.open.size() >= i) {
    calls.open.pop_back();
    exitModuleFrame();
  }
  Py_RETURN_NONE;
}

// CPython calls these from the monitored code: nothing may throw through them (a C++ exception,
// out of memory in the name cache, say); the module gets no frame instead.
PyObject *callStart(PyObject *, PyObject *const *args, Py_ssize_t nargs) noexcept {
  try {
    return callStartUnguarded(args, nargs);
  } catch (...) {
    Py_RETURN_NONE;
  }
}

PyObject *callEnd(PyObject *, PyObject *const *args, Py_ssize_t nargs) noexcept {
  try {
    return callEndUnguarded(args, nargs);
  } catch (...) {
    Py_RETURN_NONE;
  }
}

PyMethodDef kStart = {"module_call_start", reinterpret_cast<PyCFunction>(callStart), METH_FASTCALL,
                      "sys.monitoring PY_START callback: a module call starts."};
PyMethodDef kEnd = {"module_call_end", reinterpret_cast<PyCFunction>(callEnd), METH_FASTCALL,
                    "sys.monitoring PY_RETURN and PY_UNWIND callback: a module call ends."};

}  // namespace

void bindModuleEvents(nb::module_ &m) {
  m.attr("module_events_supported") = kMonitoring;
  m.attr("module_call_start") = nb::steal(PyCFunction_New(&kStart, nullptr));
  m.attr("module_call_end") = nb::steal(PyCFunction_New(&kEnd, nullptr));
  m.def(
      "set_module_events",
      [](nb::handle code, nb::handle frameName) {
        if (!selfString) selfString = PyUnicode_InternFromString("self");
        Py_XDECREF(callCode);
        Py_XDECREF(namer);
        callCode = namer = nullptr;
        clearNames();
        ++generation;
        if (!code.is_none() && !frameName.is_none()) {
          callCode = code.inc_ref().ptr();
          namer = frameName.inc_ref().ptr();
        }
      },
      nb::arg("code").none(), nb::arg("frame_name").none(),
      "The module-call function's code object whose sys.monitoring events "
      "module_call_start/module_call_end receive, and the function that names a module "
      "(parent or None, module) -> str; None, None turns them off.");
  m.def(
      "open_module_calls", [] { return threadCalls().open.size(); },
      "Module calls open on this thread with a frame from the events (for tests).");
}

}  // namespace proton::bindings
