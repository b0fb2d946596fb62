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

static_assert(sizeof(LaunchTable::Slot) == 104, "update the size in launch_table.h");

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
  out.name = StringId{static_cast<uint32_t>(meta >> 32)};
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
  settled_.fetch_add(1, std::memory_order_acq_rel);
}

LaunchTable::Slot *LaunchTable::find(uint64_t key) {
  Slot &slot = slots_[(key - 1) & mask_];
  return slot.key.load(std::memory_order_acquire) == key ? &slot : nullptr;
}

LaunchTable::Slot &LaunchTable::claim(uint64_t key) {
  // The slot's previous launch is a whole table of correlation ids older. If it is still
  // unsettled, its record is late beyond the table's reach (or never coming): given up.
  Slot &slot = slots_[(key - 1) & mask_];
  uint64_t old = slot.key.load(std::memory_order_acquire);
  while (old == kBusy || !slot.key.compare_exchange_weak(old, kBusy, std::memory_order_acq_rel))
    old = slot.key.load(std::memory_order_acquire);
  if (old != 0) dropUnsettled(slot, old);
  return slot;
}

void LaunchTable::dropUnsettled(Slot &slot, uint64_t old) {
  // Called with slot.key == kBusy: the fields still hold the old launch. A resolver that
  // copied the slot just before it was claimed may be settling it too: one exchange wins.
  uint64_t meta = slot.meta.load(std::memory_order_relaxed);
  if ((meta >> 8) & 1) return;  // a graph launch: nothing pending to settle
  if (slot.settled.exchange(old, std::memory_order_acq_rel) == old) return;
  overwritten().add();
  uint32_t count = static_cast<uint32_t>(meta & 0xff);
  for (uint32_t i = 0; i < count; ++i) {
    auto *session = reinterpret_cast<Session *>(slot.words[2 * i].load(std::memory_order_relaxed));
    session->notePending(PhaseId{slot.words[2 * i + 1].load(std::memory_order_relaxed) >> 32}, -1);
  }
  settled_.fetch_add(1, std::memory_order_acq_rel);
}

void LaunchTable::record(uint64_t correlation, const LaunchEntry *entries, uint32_t count,
                         bool multi, uint64_t launchNs, uint64_t threadId, StringId name) {
  uint64_t key = correlation + 1;
  Slot &slot = claim(key);  // key is kBusy from here until published below
  if (count > LaunchInfo::kMaxEntries) {
    tooManySessions().add(count - LaunchInfo::kMaxEntries);
    count = LaunchInfo::kMaxEntries;
  }
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t meta = count | (uint64_t(multi) << 8) | (uint64_t(name.value) << 32);
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
    recorded_.fetch_add(1, std::memory_order_acq_rel);
  }
  slot.key.store(key, std::memory_order_release);
}

void LaunchTable::cancel(uint64_t correlation) {
  LaunchInfo info;
  Slot *slot = find(correlation + 1);
  if (slot && read(*slot, correlation + 1, info)) settle(*slot, correlation + 1, info);
}

bool LaunchTable::resolve(uint64_t correlation, LaunchInfo &out) {
  Slot *slot = find(correlation + 1);
  if (!slot || !read(*slot, correlation + 1, out)) return false;
  settle(*slot, correlation + 1, out);
  return true;
}

}  // namespace proton
