#include "context/python_context.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/fork_lock.h"

namespace proton {
namespace {

std::atomic<PythonStackCapture> captureHook{nullptr};

uint64_t hashFrames(const std::vector<StringId> &frames) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (StringId f : frames) {
    h ^= f.value;
    h *= 0x100000001b3ull;
  }
  return h ^ frames.size();
}

struct StackTable {
  std::mutex mu;
  // hash -> stacks with that hash (collisions keep a list); never erased.
  std::unordered_multimap<uint64_t, std::unique_ptr<PythonStack>> stacks;
};

StackTable &table() {
  static StackTable *t = new StackTable();  // never destroyed: pointers outlive exit handlers
  return *t;
}

}  // namespace

void setPythonStackCapture(PythonStackCapture capture) {
  captureHook.store(capture, std::memory_order_release);
}

const PythonStack *capturePythonStack() noexcept {
  PythonStackCapture capture = captureHook.load(std::memory_order_acquire);
  return capture ? capture() : nullptr;
}

const PythonStack *internPythonStack(const std::vector<StringId> &frames) {
  uint64_t h = hashFrames(frames);
  StackTable &t = table();
  std::lock_guard lock(t.mu);
  auto range = t.stacks.equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second->frames == frames) return it->second.get();
  auto stack = std::make_unique<PythonStack>();
  stack->frames = frames;
  stack->hash = h;
  const PythonStack *out = stack.get();
  t.stacks.emplace(h, std::move(stack));
  return out;
}

const PythonStack *emptyPythonStack() {
  static const PythonStack *empty = internPythonStack({});
  return empty;
}

void lockPythonStacksForFork() { table().mu.lock(); }
void unlockPythonStacksAfterFork(bool inChild) { releaseAfterFork(table().mu, inChild); }

}  // namespace proton
