#include "runtime/framework_frames.h"

#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "context/forward_ops.h"
#include "context/shadow_context.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

constexpr std::string_view kBackwardPrefix = "backward: ";

// What an operator's frame is worth in a tree, known from its name.
enum class OpWeight : uint8_t {
  kFrame,     // may launch work: a frame of its own
  kEmpty,     // a view or an allocation: launches nothing and calls no operator that does
  kEmptyBoth  // kEmpty, and so is its backward node (the backward of a view is a view)
};

// Forward operators that only make a view of a tensor or allocate one. In a tree their frame
// could only ever be empty (about half of an eager training step's operators: aten::t under
// every aten::linear, its transpose and as_strided, detach, resolve_conj), so no frame is made
// for them while no trace session (where operators are CPU slices) is live. Their autograd
// sequence number is still remembered: the backward node names them.
OpWeight opWeight(std::string_view name) {
  static constexpr std::string_view kEmptyBothOps[] = {
      "aten::t",       "aten::transpose", "aten::permute", "aten::unsqueeze",   "aten::squeeze",
      "aten::numpy_T", "aten::alias",     "aten::detach",  "aten::view_as_real"};
  static constexpr std::string_view kEmptyOps[] = {
      "aten::view",       "aten::_unsafe_view",     "aten::_reshape_alias", "aten::as_strided",
      "aten::expand",     "aten::expand_as",        "aten::resolve_conj",   "aten::resolve_neg",
      "aten::slice",      "aten::select",           "aten::narrow",         "aten::view_as",
      "aten::split",      "aten::split_with_sizes", "aten::chunk",          "aten::unbind",
      "aten::diagonal",   "aten::unfold",           "aten::empty",          "aten::empty_strided",
      "aten::empty_like", "aten::result_type",      "aten::lift_fresh",     "aten::is_same_size"};
  for (std::string_view op : kEmptyBothOps)
    if (name == op) return OpWeight::kEmptyBoth;
  for (std::string_view op : kEmptyOps)
    if (name == op) return OpWeight::kEmpty;
  return OpWeight::kFrame;
}

// Per thread, in one thread-local (each one costs a call in a shared library): how many
// frames each open operator (or module) pushed, innermost last, so that an exit pops what its
// enter pushed even when a session started or ended in between; the operator names seen; and
// the thread's ThreadContext.
struct FrameworkThread {
  struct NameSlot {
    const char *address = nullptr;
    StringId id;
    std::string_view text;
    OpWeight weight = OpWeight::kFrame;
  };
  std::vector<uint8_t> pushed;
  std::array<NameSlot, 1024> names{};
  ThreadContext *context = &ThreadContext::current();
  FrameworkThread() { pushed.reserve(64); }
};

FrameworkThread &frameworkThread() {
  thread_local FrameworkThread thread;
  return thread;
}

// Operator names interned by their address, checked against the text (a named range may
// reuse a buffer): no lock and no allocation for a name seen before. The interned text is
// kept in the slot (the table's strings never move), so the check takes no lock either.
const FrameworkThread::NameSlot &internOpName(FrameworkThread &thread, const char *name) {
  size_t h = (reinterpret_cast<uintptr_t>(name) >> 3) & (thread.names.size() - 1);
  FrameworkThread::NameSlot &slot = thread.names[h];
  if (slot.address == name && slot.text == std::string_view(name)) return slot;
  StringId id = StringTable::global().intern(name);
  std::string_view text = StringTable::global().view(id);
  slot = {name, id, text, opWeight(text)};
  return slot;
}

// "backward: <name>", interned once per name and thread.
StringId backwardName(StringId forward) {
  struct Slot {
    StringId forward, backward;
  };
  thread_local std::array<Slot, 256> cache{};
  Slot &slot = cache[forward.value & (cache.size() - 1)];
  if (slot.backward != StringId{} && slot.forward == forward) return slot.backward;
  std::string text(kBackwardPrefix);
  text += StringTable::global().view(forward);
  slot = Slot{forward, StringTable::global().intern(text)};
  return slot.backward;
}

uint8_t push(FrameworkThread &thread, StringId name, FrameworkFrame kind, bool withDepth = false) {
  return SessionManager::global().enterFramework(*thread.context, name, static_cast<uint8_t>(kind),
                                                 withDepth)
             ? 1
             : 0;
}

void enterOp(const char *name, int kind, int64_t sequence, uint64_t thread,
             uint64_t forwardThread) noexcept {
  FrameworkThread &open = frameworkThread();
  SessionManager &m = SessionManager::global();
  if (!m.frameworkLive() || kind == PROTON_OP_SKIP || !name) {
    open.pushed.push_back(0);
    return;
  }
  try {
    const FrameworkThread::NameSlot &slot = internOpName(open, name);
    StringId id = slot.id;
    // Trees only: a trace shows every operator as a CPU slice.
    const bool leaveEmpty = !m.traceLive();
    uint8_t n = 0;
    if (kind == PROTON_OP_BACKWARD) {
      ForwardOp op;
      if (ForwardOps::global().find(forwardThread, sequence, op)) {
        if (leaveEmpty && op.emptyBackward) {
          open.pushed.push_back(0);
          return;
        }
        if (op.modulePath)
          for (StringId f : op.modulePath->frames)
            n += push(open, f, FrameworkFrame::kBackwardModule);
        id = op.name;
      }
      n += push(open, backwardName(id), FrameworkFrame::kBackward);
    } else {
      if (kind == PROTON_OP_FORWARD && sequence >= 0)
        ForwardOps::global().record(thread, sequence, m.currentModulePath(), id,
                                    slot.weight == OpWeight::kEmptyBoth);
      if (kind == PROTON_OP_FORWARD && leaveEmpty && slot.weight != OpWeight::kFrame) {
        open.pushed.push_back(0);
        return;
      }
      n += push(open, id, FrameworkFrame::kOperator);
    }
    open.pushed.push_back(n);
  } catch (...) {
    open.pushed.push_back(0);  // out of memory: no frame for this operator
  }
}

void exitOp() noexcept {
  FrameworkThread &open = frameworkThread();
  if (open.pushed.empty()) return;
  uint8_t n = open.pushed.back();
  open.pushed.pop_back();
  try {
    for (uint8_t i = 0; i < n; ++i) SessionManager::global().exitFramework(*open.context);
  } catch (...) {
  }
}

const proton_framework_api kApi{PROTON_FRAMEWORK_API_VERSION, sizeof(proton_framework_api),
                                &enterOp, &exitOp};

}  // namespace

const proton_framework_api *frameworkApi() { return &kApi; }

void enterModuleFrame(StringId name) {
  FrameworkThread &open = frameworkThread();
  if (!SessionManager::global().frameworkLive()) {
    open.pushed.push_back(0);
    return;
  }
  open.pushed.push_back(push(open, name, FrameworkFrame::kModule, /*withDepth=*/true));
}

void exitModuleFrame() { exitOp(); }

void enterFrames(const StringId *names, size_t n) {
  FrameworkThread &open = frameworkThread();
  if (!SessionManager::global().frameworkLive() || n > 255) {
    open.pushed.push_back(0);
    return;
  }
  uint8_t pushed = 0;
  for (size_t i = 0; i < n; ++i) pushed += push(open, names[i], FrameworkFrame::kOperator);
  open.pushed.push_back(pushed);
}

void exitFrames() { exitOp(); }

}  // namespace proton
