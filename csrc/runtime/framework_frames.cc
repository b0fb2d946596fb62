#include "runtime/framework_frames.h"

#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "context/forward_ops.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

constexpr std::string_view kBackwardPrefix = "backward: ";

// Per thread: how many frames each open operator (or module) pushed, innermost last, so
// that an exit pops what its enter pushed even when a session started or ended in between.
struct OpenFrames {
  std::vector<uint8_t> pushed;
  OpenFrames() { pushed.reserve(64); }
};

OpenFrames &openFrames() {
  thread_local OpenFrames open;
  return open;
}

// Operator names interned by their address, checked against the text (a named range may
// reuse a buffer): no lock and no allocation for a name seen before.
StringId internOpName(const char *name) {
  struct Slot {
    const char *address = nullptr;
    StringId id;
  };
  thread_local std::array<Slot, 1024> cache{};
  size_t h = (reinterpret_cast<uintptr_t>(name) >> 3) & (cache.size() - 1);
  Slot &slot = cache[h];
  if (slot.address == name && StringTable::global().view(slot.id) == std::string_view(name))
    return slot.id;
  slot = Slot{name, StringTable::global().intern(name)};
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

uint8_t push(StringId name, FrameworkFrame kind, bool withDepth = false) {
  return SessionManager::global().enterFramework(name, static_cast<uint8_t>(kind), withDepth) ? 1
                                                                                              : 0;
}

void enterOp(const char *name, int kind, int64_t sequence, uint64_t thread,
             uint64_t forwardThread) noexcept {
  OpenFrames &open = openFrames();
  SessionManager &m = SessionManager::global();
  if (!m.frameworkLive() || kind == PROTON_OP_SKIP || !name) {
    open.pushed.push_back(0);
    return;
  }
  try {
    StringId id = internOpName(name);
    uint8_t n = 0;
    if (kind == PROTON_OP_BACKWARD) {
      ForwardOp op;
      if (ForwardOps::global().find(forwardThread, sequence, op)) {
        if (op.modulePath)
          for (StringId f : op.modulePath->frames) n += push(f, FrameworkFrame::kBackwardModule);
        id = op.name;
      }
      n += push(backwardName(id), FrameworkFrame::kBackward);
    } else {
      if (kind == PROTON_OP_FORWARD && sequence >= 0)
        ForwardOps::global().record(thread, sequence, m.currentModulePath(), id);
      n += push(id, FrameworkFrame::kOperator);
    }
    open.pushed.push_back(n);
  } catch (...) {
    open.pushed.push_back(0);  // out of memory: no frame for this operator
  }
}

void exitOp() noexcept {
  OpenFrames &open = openFrames();
  if (open.pushed.empty()) return;
  uint8_t n = open.pushed.back();
  open.pushed.pop_back();
  try {
    for (uint8_t i = 0; i < n; ++i) SessionManager::global().exitFramework();
  } catch (...) {
  }
}

const proton_framework_api kApi{PROTON_FRAMEWORK_API_VERSION, sizeof(proton_framework_api),
                                &enterOp, &exitOp};

}  // namespace

const proton_framework_api *frameworkApi() { return &kApi; }

void enterModuleFrame(StringId name) {
  OpenFrames &open = openFrames();
  if (!SessionManager::global().frameworkLive()) {
    open.pushed.push_back(0);
    return;
  }
  open.pushed.push_back(push(name, FrameworkFrame::kModule, /*withDepth=*/true));
}

void exitModuleFrame() { exitOp(); }

void enterFrames(const StringId *names, size_t n) {
  OpenFrames &open = openFrames();
  if (!SessionManager::global().frameworkLive() || n > 255) {
    open.pushed.push_back(0);
    return;
  }
  uint8_t pushed = 0;
  for (size_t i = 0; i < n; ++i) pushed += push(names[i], FrameworkFrame::kOperator);
  open.pushed.push_back(pushed);
}

void exitFrames() { exitOp(); }

}  // namespace proton
