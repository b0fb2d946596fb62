#include "context/stack_join.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "context/native_stack.h"
#include "core/check.h"
#include "core/string_table.h"

namespace proton {
namespace {

// Power of two. A compiled backward graph launches from a few hundred lines of its generated
// code, each a stack of its own joined under the caller's: the cache holds them all.
constexpr size_t kJoinSlots = 1024;

struct JoinSlot {
  const PythonStack *outer = nullptr;
  const PythonStack *inner = nullptr;
  const PythonStack *joined = nullptr;
};

struct SplitSlot {
  const PythonStack *native = nullptr;
  const PythonStack *below = nullptr;
};

size_t slotOf(const void *a, const void *b) {
  uint64_t h = reinterpret_cast<uintptr_t>(a) * 0x9e3779b97f4a7c15ull;
  h ^= reinterpret_cast<uintptr_t>(b) + (h >> 29);
  h *= 0xbf58476d1ce4e5b9ull;
  return (h >> 32) & (kJoinSlots - 1);
}

}  // namespace

const PythonStack *joinStacks(const PythonStack *outer, const PythonStack *inner) {
  if (!outer || outer->frames.empty()) return inner ? inner : outer;
  if (!inner || inner->frames.empty()) return outer;
  thread_local std::array<JoinSlot, kJoinSlots> cache{};
  JoinSlot &slot = cache[slotOf(outer, inner)];
  if (PROTON_LIKELY(slot.outer == outer && slot.inner == inner)) return slot.joined;
  std::vector<StringId> frames;
  frames.reserve(outer->frames.size() + inner->frames.size());
  frames.insert(frames.end(), outer->frames.begin(), outer->frames.end());
  frames.insert(frames.end(), inner->frames.begin(), inner->frames.end());
  slot = JoinSlot{outer, inner, internPythonStack(frames)};
  return slot.joined;
}

const PythonStack *appendFrame(const PythonStack *parent, StringId frame) {
  thread_local std::array<JoinSlot, kJoinSlots> cache{};
  const auto *key = reinterpret_cast<const PythonStack *>(uintptr_t(frame.value) + 1);
  JoinSlot &slot = cache[slotOf(parent, key)];
  if (PROTON_LIKELY(slot.joined && slot.outer == parent && slot.inner == key)) return slot.joined;
  std::vector<StringId> frames;
  if (parent) frames = parent->frames;
  frames.push_back(frame);
  slot = JoinSlot{parent, key, internPythonStack(frames)};
  return slot.joined;
}

namespace {

std::mutex callFilesMu;
std::vector<std::string> callFiles;  // guarded by callFilesMu
std::atomic<uint64_t> callFilesVersion{1};

bool inCallFiles(std::string_view frame, const std::vector<std::string> &files) {
  size_t colon = frame.rfind('@');
  std::string_view location = frame.substr(0, colon);
  size_t line = location.rfind(':');
  std::string_view file = location.substr(0, line);
  for (const std::string &suffix : files)
    if (file.size() >= suffix.size() && file.substr(file.size() - suffix.size()) == suffix)
      return true;
  return false;
}

}  // namespace

void setModuleCallFiles(std::vector<std::string> suffixes) {
  std::lock_guard guard(callFilesMu);
  callFiles = std::move(suffixes);
  callFilesVersion.fetch_add(1, std::memory_order_release);
}

size_t callerDepth(const PythonStack *stack) {
  if (!stack) return 0;
  struct Slot {
    const PythonStack *stack = nullptr;
    uint64_t version = 0;
    size_t depth = 0;
  };
  thread_local std::array<Slot, kJoinSlots> cache{};
  uint64_t version = callFilesVersion.load(std::memory_order_acquire);
  Slot &slot = cache[slotOf(stack, nullptr)];
  if (PROTON_LIKELY(slot.stack == stack && slot.version == version)) return slot.depth;
  std::vector<std::string> files;
  {
    std::lock_guard guard(callFilesMu);
    files = callFiles;
  }
  const StringTable &strings = StringTable::global();
  size_t depth = stack->frames.size();
  while (depth > 0 && inCallFiles(strings.view(stack->frames[depth - 1]), files)) --depth;
  slot = Slot{stack, version, depth};
  return depth;
}

bool isInterpreterFrame(std::string_view frame) {
  size_t open = frame.rfind(" (");
  if (open == std::string_view::npos) return false;
  return isInterpreterModule(frame.substr(open + 2));
}

const PythonStack *belowInterpreter(const PythonStack *native) {
  if (!native) return nullptr;
  thread_local std::array<SplitSlot, kJoinSlots> cache{};
  SplitSlot &slot = cache[slotOf(native, nullptr)];
  if (PROTON_LIKELY(slot.native == native)) return slot.below;
  const StringTable &strings = StringTable::global();
  size_t first = 0;  // the first frame after the innermost interpreter frame
  for (size_t i = native->frames.size(); i-- > 0;) {
    if (isInterpreterFrame(strings.view(native->frames[i]))) {
      first = i + 1;
      break;
    }
  }
  const PythonStack *below = native;
  if (first > 0)
    below = internPythonStack(
        std::vector<StringId>(native->frames.begin() + first, native->frames.end()));
  slot = SplitSlot{native, below};
  return below;
}

}  // namespace proton
