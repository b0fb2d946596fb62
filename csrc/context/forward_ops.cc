#include "context/forward_ops.h"

namespace proton {

ForwardOps &ForwardOps::global() {
  static ForwardOps *table = new ForwardOps();  // never destroyed: observers outlive exit
  return *table;
}

size_t ForwardOps::slotOf(uint64_t thread, int64_t sequence) {
  uint64_t h = static_cast<uint64_t>(sequence) ^ (thread * 0x9e3779b97f4a7c15ull);
  return static_cast<size_t>(h & (kSlots - 1));
}

void ForwardOps::record(uint64_t thread, int64_t sequence, const PythonStack *modulePath,
                        StringId name, bool emptyBackward) {
  if (sequence < 0) return;
  Slot &s = (*slots_)[slotOf(thread, sequence)];
  uint32_t v = s.version.load(std::memory_order_relaxed);
  // Two writers of one slot at once (two threads' numbers colliding) could interleave: the
  // later one restarts from an even version, and a reader rejects the odd one in between.
  s.version.store(v | 1u, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.thread.store(thread, std::memory_order_relaxed);
  s.sequence.store(sequence, std::memory_order_relaxed);
  s.modulePath.store(modulePath, std::memory_order_relaxed);
  s.name.store(name.value, std::memory_order_relaxed);
  s.emptyBackward.store(emptyBackward, std::memory_order_relaxed);
  s.version.store((v | 1u) + 1, std::memory_order_release);
}

bool ForwardOps::find(uint64_t thread, int64_t sequence, ForwardOp &out) const {
  if (sequence < 0) return false;
  const Slot &s = (*slots_)[slotOf(thread, sequence)];
  uint32_t before = s.version.load(std::memory_order_acquire);
  if (before & 1u) return false;
  uint64_t t = s.thread.load(std::memory_order_relaxed);
  int64_t q = s.sequence.load(std::memory_order_relaxed);
  const PythonStack *path = s.modulePath.load(std::memory_order_relaxed);
  uint32_t name = s.name.load(std::memory_order_relaxed);
  bool emptyBackward = s.emptyBackward.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.version.load(std::memory_order_relaxed) != before) return false;
  if (t != thread || q != sequence) return false;
  out.modulePath = path;
  out.name = StringId{name};
  out.emptyBackward = emptyBackward;
  return true;
}

}  // namespace proton
