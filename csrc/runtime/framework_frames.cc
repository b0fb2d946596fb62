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

// Per thread, in one thread-local (each one costs a call in a shared library): how many
// frames each open operator (or module) pushed, innermost last, so that an exit pops what its
// enter pushed even when a session started or ended in between; the operator names seen; and
// the thread's ThreadContext.
struct FrameworkThread {
  struct NameSlot {
    const char *address = nullptr;
    StringId id;
    std::string_view text;
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
StringId internOpName(FrameworkThread &thread, const char *name) {
  size_t h = (reinterpret_cast<uintptr_t>(name) >> 3) & (thread.names.size() - 1);
  FrameworkThread::NameSlot &slot = thread.names[h];
  if (slot.address == name && slot.text == std::string_view(name)) return slot.id;
  StringId id = StringTable::global().intern(name);
  slot = {name, id, StringTable::global().view(id)};
  return slot.id;
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
    StringId id = internOpName(open, name);
    uint8_t n = 0;
    if (kind == PROTON_OP_BACKWARD) {
      ForwardOp op;
      if (ForwardOps::global().find(forwardThread, sequence, op)) {
        if (op.modulePath)
          for (StringId f : op.modulePath->frames)
            n += push(open, f, FrameworkFrame::kBackwardModule);
        id = op.name;
      }
      n += push(open, backwardName(id), FrameworkFrame::kBackward);
    } else {
      if (kind == PROTON_OP_FORWARD && sequence >= 0)
        ForwardOps::global().record(thread, sequence, m.currentModulePath(), id);
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
