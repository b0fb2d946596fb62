#include "context/cpython_frames.h"

#include <Python.h>
#include <frameobject.h>

// CPython 3.11 to 3.13 (with the GIL) keep a thread's frames as _PyInterpreterFrame structs
// and make a PyFrameObject for one only when asked: PyThreadState_GetFrame and PyFrame_GetBack
// allocate one per frame not yet asked for, which is most frames of a fresh call (about 45 ns
// each, 800 ns for a 15-deep stack). The walker reads the interpreter's frames directly
// instead, through CPython's own internal header, as debuggers and samplers do. Other
// versions, and free-threaded builds, walk the public frame objects.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    defined(__has_include)
#if __has_include(<internal/pycore_frame.h>)
#define PROTON_INTERPRETER_FRAMES 1
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#endif
#endif

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
constexpr size_t kStackSlots = 4096;                    // power of two
constexpr uint64_t kStackSeed = 0x6a09e667f3bcc909ull;  // a walk's hash before any frame

#ifndef PROTON_INTERPRETER_FRAMES
int lastInstruction(PyFrameObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(frame);
#else
  return frame->f_lasti;
#endif
}
#endif

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

thread_local uint64_t seenWithoutGilCount = 0;  // for tests
std::atomic<uint32_t> cacheEpoch{1};            // moves on when a walker drops its caches

#ifdef PROTON_INTERPRETER_FRAMES
class Walker;

// Per thread, the stacks it walked last, so that a thread that released the GIL (PyTorch's
// operators and Triton's launcher release it around a launch) finds a stack it has seen before
// without taking the GIL back. A slot belongs to the walker that filled it (another has other
// skip rules) and is good for one epoch: the epoch moves on when the walker's caches are
// dropped, after which a code object's address may be reused.
struct ThreadSlot {
  uint64_t hash;
  uint32_t depth;
  uint32_t epoch;
  const Walker *walker;
  const PythonStack *stack;
};
constexpr size_t kMaxWalkWithoutGil = size_t(1) << 16;  // frames; past it, the GIL is taken
constexpr size_t kThreadSlots = 256;                    // power of two
thread_local ThreadSlot threadSlots[kThreadSlots];
void remember(const Walker *walker, uint64_t h, size_t depth, uint32_t epoch,
              const PythonStack *stack) {
  threadSlots[h & (kThreadSlots - 1)] =
      ThreadSlot{h, static_cast<uint32_t>(depth), epoch, walker, stack};
}
#endif

// One frame of a walk. With interpreter frames no reference is taken: the walk runs on the
// walking thread's own frames, live below the current call, so nothing frees their code
// objects before the walk is done. Else frame and code are owned references.
struct Walked {
  PyFrameObject *frame;  // null with interpreter frames
  PyObject *code;
  int lasti;  // in bytes, as PyFrame_GetLasti
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
    PyThreadState *mine = PyGILState_GetThisThreadState();
    if (!acquireGil_ || mine == nullptr) return nullptr;
#ifdef PROTON_INTERPRETER_FRAMES
    if (const PythonStack *seen = seenWithoutGil(mine)) return seen;
#endif
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
#ifndef PROTON_INTERPRETER_FRAMES
    for (Walked &w : walked_) {
      Py_DECREF(w.code);
      Py_DECREF(w.frame);
    }
#endif
    walked_.clear();
    walking_ = false;
    return out;
  }

#ifdef PROTON_INTERPRETER_FRAMES
  static _PyInterpreterFrame *currentFrame(PyThreadState *thread) {
#if PY_VERSION_HEX >= 0x030D0000
    return thread->current_frame;
#else
    return thread->cframe->current_frame;
#endif
  }

  static PyCodeObject *codeOf(_PyInterpreterFrame *frame) {
#if PY_VERSION_HEX >= 0x030D0000
    return _PyFrame_GetCode(frame);
#else
    return frame->f_code;
#endif
  }

  static int lastiOf(_PyInterpreterFrame *frame) {
    return _PyInterpreterFrame_LASTI(frame) * static_cast<int>(sizeof(_Py_CODEUNIT));
  }

  // Calls visit(code, lasti) for the frames PyFrame_GetBack would give, innermost first (an
  // incomplete frame, one still setting up or an entry shim on the C stack, is passed over, as
  // it does), and hashes them into h. False when visit stops the walk.
  template <typename Visit>
  static bool hashFrames(PyThreadState *thread, uint64_t &h, Visit visit) {
    h = kStackSeed;
    for (_PyInterpreterFrame *f = currentFrame(thread); f; f = f->previous) {
      if (_PyFrame_IsIncomplete(f)) continue;
      PyObject *code = reinterpret_cast<PyObject *>(codeOf(f));
      h = mix(h, code, lastiOf(f));
      if (!visit(code, lastiOf(f))) return false;
    }
    return true;
  }

  const PythonStack *walk() {
    uint64_t h;
    hashFrames(PyThreadState_Get(), h, [this](PyObject *code, int lasti) {
      walked_.push_back(Walked{nullptr, code, lasti});
      return true;
    });
    const PythonStack *stack = find(h);
    // After find: a build may have dropped the caches (and then kept this stack's code objects
    // again); no other thread drops them while this one holds the GIL.
    remember(this, h, walked_.size(), cacheEpoch.load(std::memory_order_acquire), stack);
    return stack;
  }

  // Without the GIL: the thread's own frames do not change while it runs C code, and the code
  // objects they hold stay alive, so they are read as they are; only this thread's cache is
  // consulted. Null when this thread has not walked this stack with this walker in this epoch.
  // The interpreter may start finalizing (and free thread states) under the walk: its result is
  // then dropped, and a walk that runs too long gives up.
  const PythonStack *seenWithoutGil(PyThreadState *mine) const noexcept {
    const uint32_t epoch = cacheEpoch.load(std::memory_order_acquire);
    uint64_t h;
    size_t depth = 0;
    if (!hashFrames(mine, h, [&depth](PyObject *, int) { return ++depth <= kMaxWalkWithoutGil; }))
      return nullptr;
    if (interpreterGone()) return nullptr;
    const ThreadSlot &slot = threadSlots[h & (kThreadSlots - 1)];
    if (slot.stack && slot.walker == this && slot.hash == h && slot.depth == depth &&
        slot.epoch == epoch) {
      ++seenWithoutGilCount;
      return slot.stack;
    }
    return nullptr;
  }
#else
  const PythonStack *walk() {
    PyFrameObject *frame = PyThreadState_GetFrame(PyThreadState_Get());
    uint64_t h = kStackSeed;
    while (frame) {
      PyCodeObject *code = PyFrame_GetCode(frame);
      int lasti = lastInstruction(frame);
      h = mix(h, code, lasti);
      walked_.push_back(Walked{frame, reinterpret_cast<PyObject *>(code), lasti});
      frame = PyFrame_GetBack(frame);
    }
    return find(h);
  }
#endif

  const PythonStack *find(uint64_t h) {
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
    int line = w.frame ? PyFrame_GetLineNumber(w.frame)
                       : PyCode_Addr2Line(reinterpret_cast<PyCodeObject *>(w.code), w.lasti);
    StringId id =
        StringTable::global().intern(code.file + ":" + std::to_string(line) + "@" + code.function);
    frames_.emplace(key, id);
    return id;
  }

  void dropCaches() {
    cacheEpoch.fetch_add(1, std::memory_order_acq_rel);  // before any code object is let go
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

uint64_t cpythonStacksSeenWithoutGil() { return seenWithoutGilCount; }

}  // namespace proton
