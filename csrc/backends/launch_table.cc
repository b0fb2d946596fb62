#include "backends/launch_table.h"

#include "core/session.h"
#include "core/stats.h"

namespace proton {
namespace {

Counter &overwritten() {
  static Counter &c = Stats::global().counter("launch_correlations_overwritten");
  return c;
}

Counter &tooManySessions() {
  static Counter &c = Stats::global().counter("launch_sessions_over_limit");
  return c;
}

size_t roundUp(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

LaunchTable::LaunchTable(size_t slots)
    : slots_(new Slot[roundUp(slots)]), mask_(roundUp(slots) - 1) {
  overwritten();
  tooManySessions();
}

bool LaunchTable::read(const Slot &slot, uint64_t key, LaunchInfo &out) const {
  if (slot.key.load(std::memory_order_acquire) != key) return false;
  uint64_t meta = slot.meta.load(std::memory_order_relaxed);
  out.count = static_cast<uint32_t>(meta & 0xff);
  out.multi = (meta >> 8) & 1;
  out.launchNs = slot.launchNs.load(std::memory_order_relaxed);
  out.threadId = slot.threadId.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < out.count; ++i) {
    out.entries[i].session =
        reinterpret_cast<Session *>(slot.words[2 * i].load(std::memory_order_relaxed));
    uint64_t w = slot.words[2 * i + 1].load(std::memory_order_relaxed);
    out.entries[i].node = NodeId{static_cast<uint32_t>(w)};
    out.entries[i].phase = PhaseId{w >> 32};
    out.entries[i].named = (meta >> (16 + i)) & 1;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.key.load(std::memory_order_relaxed) == key;
}

void LaunchTable::settle(Slot &slot, uint64_t key, const LaunchInfo &info) {
  if (info.multi) return;
  if (slot.settled.exchange(key, std::memory_order_acq_rel) == key) return;  // already done
  for (uint32_t i = 0; i < info.count; ++i)
    info.entries[i].session->notePending(info.entries[i].phase, -1);
  outstanding_.fetch_sub(1, std::memory_order_acq_rel);
}

void LaunchTable::record(uint64_t correlation, const LaunchEntry *entries, uint32_t count,
                         bool multi, uint64_t launchNs, uint64_t threadId) {
  Slot &slot = slots_[correlation & mask_];
  uint64_t key = correlation + 1;
  // A launch still unsettled in this slot will never be matched now: settle it as lost.
  uint64_t old = slot.key.load(std::memory_order_acquire);
  if (old != 0 && old != kBusy && old != key) {
    LaunchInfo previous;
    if (read(slot, old, previous) && !previous.multi &&
        slot.settled.load(std::memory_order_acquire) != old) {
      overwritten().add();
      settle(slot, old, previous);
    }
  }
  if (count > LaunchInfo::kMaxEntries) {
    tooManySessions().add(count - LaunchInfo::kMaxEntries);
    count = LaunchInfo::kMaxEntries;
  }
  slot.key.store(kBusy, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t meta = count | (uint64_t(multi) << 8);
  for (uint32_t i = 0; i < count; ++i) meta |= uint64_t(entries[i].named) << (16 + i);
  slot.meta.store(meta, std::memory_order_relaxed);
  slot.launchNs.store(launchNs, std::memory_order_relaxed);
  slot.threadId.store(threadId, std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    slot.words[2 * i].store(reinterpret_cast<uint64_t>(entries[i].session),
                            std::memory_order_relaxed);
    slot.words[2 * i + 1].store((entries[i].phase.value << 32) | entries[i].node.value,
                                std::memory_order_relaxed);
  }
  if (!multi) {
    for (uint32_t i = 0; i < count; ++i) entries[i].session->notePending(entries[i].phase, 1);
    outstanding_.fetch_add(1, std::memory_order_acq_rel);
  }
  slot.key.store(key, std::memory_order_release);
}

void LaunchTable::cancel(uint64_t correlation) {
  Slot &slot = slots_[correlation & mask_];
  LaunchInfo info;
  if (read(slot, correlation + 1, info)) settle(slot, correlation + 1, info);
}

bool LaunchTable::resolve(uint64_t correlation, LaunchInfo &out) {
  Slot &slot = slots_[correlation & mask_];
  if (!read(slot, correlation + 1, out)) return false;
  settle(slot, correlation + 1, out);
  return true;
}

}  // namespace proton
