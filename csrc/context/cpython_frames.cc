#include "context/cpython_frames.h"

#include <Python.h>
#include <frameobject.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "context/python_context.h"
#include "core/check.h"
#include "core/string_table.h"

namespace proton {
namespace {

constexpr size_t kMaxCodes = size_t(1) << 16;
constexpr size_t kStackSlots = 4096;  // power of two

int lastInstruction(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(frame);
#else
  return frame->f_lasti;
#endif
}

bool interpreterGone() {
  if (!Py_IsInitialized()) return true;
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

std::string utf8(PyObject *s) {
  if (!s || !PyUnicode_Check(s)) return "?";
  Py_ssize_t n = 0;
  const char *data = PyUnicode_AsUTF8AndSize(s, &n);
  if (!data) {
    PyErr_Clear();  // e.g. a lone surrogate: keep a placeholder rather than fail the walk
    return "?";
  }
  return std::string(data, static_cast<size_t>(n));
}

uint64_t mix(uint64_t h, const void *code, int lasti) {
  h ^= reinterpret_cast<uintptr_t>(code) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(static_cast<uint32_t>(lasti)) * 0xff51afd7ed558ccdull;
  return h * 0xc4ceb9fe1a85ec53ull;
}

struct CodeInfo {
  std::string file;
  std::string function;
  bool skip = false;  // a frame of the profiler itself
};

struct FrameKey {
  PyObject *code;
  int lasti;
  bool operator==(const FrameKey &o) const { return code == o.code && lasti == o.lasti; }
};
struct FrameKeyHash {
  size_t operator()(const FrameKey &k) const {
    return std::hash<uintptr_t>()(reinterpret_cast<uintptr_t>(k.code)) * 31 + k.lasti;
  }
};

struct StackSlot {
  uint64_t hash = 0;
  uint32_t depth = 0;
  const PythonStack *stack = nullptr;
};

struct Walked {
  PyFrameObject *frame;  // owned reference
  PyObject *code;        // owned reference
  int lasti;
};

// Every member is guarded by the GIL.
class Walker {
 public:
  Walker(std::vector<std::string> skipPrefixes, bool acquireGil, std::vector<std::string> skipFiles)
      : skipPrefixes_(std::move(skipPrefixes)),
        skipFiles_(skipFiles.begin(), skipFiles.end()),
        acquireGil_(acquireGil),
        slots_(new StackSlot[kStackSlots]) {
    walked_.reserve(256);
    names_.reserve(256);
  }

  const PythonStack *capture() noexcept {
    if (interpreterGone()) return nullptr;
    if (PyGILState_Check()) return walkGuarded();
    // The GIL is released. Only a thread the interpreter knows (it called into C from Python)
    // takes it back; a native thread never touches the interpreter.
    if (!acquireGil_ || PyGILState_GetThisThreadState() == nullptr) return nullptr;
    PyGILState_STATE state = PyGILState_Ensure();
    const PythonStack *out = walkGuarded();
    PyGILState_Release(state);
    return out;
  }

 private:
  const PythonStack *walkGuarded() noexcept {
    if (walking_) return nullptr;  // re-entered from a finalizer run during our walk
    walking_ = true;
    const PythonStack *out = nullptr;
    try {
      out = walk();
    } catch (...) {
      out = nullptr;  // out of memory: no frames for this launch
    }
    for (Walked &w : walked_) {
      Py_DECREF(w.code);
      Py_DECREF(w.frame);
    }
    walked_.clear();
    walking_ = false;
    return out;
  }

  const PythonStack *walk() {
    PyFrameObject *frame = PyThreadState_GetFrame(PyThreadState_Get());
    uint64_t h = 0x6a09e667f3bcc909ull;
    while (frame) {
      PyCodeObject *code = PyFrame_GetCode(frame);
      int lasti = lastInstruction(frame);
      h = mix(h, code, lasti);
      walked_.push_back(Walked{frame, reinterpret_cast<PyObject *>(code), lasti});
      frame = PyFrame_GetBack(frame);
    }
    StackSlot &slot = slots_[h & (kStackSlots - 1)];
    if (PROTON_LIKELY(slot.stack && slot.hash == h && slot.depth == walked_.size()))
      return slot.stack;
    return build(h, slot);
  }

  // Slow path: name every frame (cached per code object and instruction) and intern the stack.
  const PythonStack *build(uint64_t h, StackSlot &slot) {
    if (codes_.size() > kMaxCodes) dropCaches();
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);  // leave any pending error as we found it
    names_.clear();
    for (size_t i = walked_.size(); i-- > 0;) {  // outermost first
      const Walked &w = walked_[i];
      const CodeInfo &code = info(w.code);
      if (!code.skip) names_.push_back(frameName(w, code));
    }
    PyErr_Restore(type, value, traceback);
    const PythonStack *stack = internPythonStack(names_);
    slot = StackSlot{h, static_cast<uint32_t>(walked_.size()), stack};
    return stack;
  }

  const CodeInfo &info(PyObject *object) {
    auto it = codes_.find(object);
    if (it != codes_.end()) return it->second;
    auto *code = reinterpret_cast<PyCodeObject *>(object);
    CodeInfo ci;
    ci.file = utf8(code->co_filename);
    ci.function = utf8(code->co_name);
    for (const std::string &prefix : skipPrefixes_)
      if (!prefix.empty() && ci.file.compare(0, prefix.size(), prefix) == 0) ci.skip = true;
    if (skipFiles_.count(ci.file)) ci.skip = true;
    Py_INCREF(object);  // keeps the address from being reused while cached
    return codes_.emplace(object, std::move(ci)).first->second;
  }

  StringId frameName(const Walked &w, const CodeInfo &code) {
    FrameKey key{w.code, w.lasti};
    auto it = frames_.find(key);
    if (it != frames_.end()) return it->second;
    int line = PyFrame_GetLineNumber(w.frame);
    StringId id =
        StringTable::global().intern(code.file + ":" + std::to_string(line) + "@" + code.function);
    frames_.emplace(key, id);
    return id;
  }

  void dropCaches() {
    for (StackSlot *s = slots_.get(); s != slots_.get() + kStackSlots; ++s) *s = StackSlot{};
    frames_.clear();
    std::unordered_map<PyObject *, CodeInfo> old;
    old.swap(codes_);
    for (auto &entry : old) Py_DECREF(entry.first);
  }

  const std::vector<std::string> skipPrefixes_;
  const std::unordered_set<std::string> skipFiles_;
  const bool acquireGil_;
  std::unique_ptr<StackSlot[]> slots_;
  std::unordered_map<PyObject *, CodeInfo> codes_;
  std::unordered_map<FrameKey, StringId, FrameKeyHash> frames_;
  std::vector<Walked> walked_;
  std::vector<StringId> names_;
  bool walking_ = false;
};

std::atomic<Walker *> walker{nullptr};

const PythonStack *captureWithWalker() noexcept {
  Walker *w = walker.load(std::memory_order_acquire);
  return w ? w->capture() : nullptr;
}

}  // namespace

void installCPythonFrameWalker(std::vector<std::string> skipPrefixes, bool acquireGil,
                               std::vector<std::string> skipFiles) {
  // Never freed: a launch callback on another thread may still be using the previous one.
  walker.store(new Walker(std::move(skipPrefixes), acquireGil, std::move(skipFiles)),
               std::memory_order_release);
  setPythonStackCapture(&captureWithWalker);
}

std::vector<std::string> cpythonStackNames() {
  std::vector<std::string> out;
  if (const PythonStack *s = captureWithWalker())
    for (StringId f : s->frames) out.emplace_back(StringTable::global().view(f));
  return out;
}

uintptr_t cpythonStackKey() { return reinterpret_cast<uintptr_t>(captureWithWalker()); }

}  // namespace proton
