// LaunchTable: where each device launch was attributed, kept until the vendor delivers the
// launch's records, keyed by the vendor's correlation id.
//
//   LaunchTable table;
//   table.record(corr, entries, n, /*multi=*/false, launchNs, threadId);  // launching thread
//   LaunchInfo info;
//   if (table.resolve(corr, info)) file(info);                           // record thread
//
// Layout: a fixed ring of slots, slot = correlation id mod size. Ids grow monotonically but
// sparsely (every API call takes one), so the ring spans kDefaultSlots ids, not launches.
// A slot's previous launch, a whole ring of ids older, is given up if still unsettled: its
// record is most likely never coming, and probing elsewhere would let such launches crowd
// out young ones.
//   [ key | meta (count, multi, named, name) | settled | launchNs | threadId | entries x 4 ]
// Each slot is a seqlock: the writer claims it by CAS of key to kBusy, writes, then publishes
// key = corr+1; a reader copies the slot and accepts the copy only if key did not change
// meanwhile. A launch whose slot is reused before its record arrives is counted
// (launch_correlations_overwritten); its record counts as unmatched.
//
// Thread-safe and lock-free: any thread may record (its own correlation ids), any thread may
// resolve. No allocation after construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/ids.h"
#include "core/launch_entry.h"

namespace proton {

class LaunchTable {
 public:
  // 2^18 slots of 104 bytes (27 MB): on an H200, 8 threads launching tiny kernels kept more
  // than 2^16 correlation ids between a launch and its record.
  static constexpr size_t kDefaultSlots = size_t(1) << 18;
  explicit LaunchTable(size_t slots = kDefaultSlots);  // rounded up to a power of two

  // Records a launch; single launches count as pending in their sessions' phases until
  // resolved or cancelled. Entries beyond kMaxEntries are dropped and counted.
  void record(uint64_t correlation, const LaunchEntry *entries, uint32_t count, bool multi,
              uint64_t launchNs, uint64_t threadId, StringId name = {});
  // The launch will produce no record (it failed, or was captured into a graph).
  void cancel(uint64_t correlation);
  // Copies the launch that produced a record; false if unknown or overwritten. The first
  // resolve of a single launch settles its pending count; later ones only read.
  bool resolve(uint64_t correlation, LaunchInfo &out);
  // Single launches recorded and not yet settled.
  int64_t outstanding() const {
    int64_t settled = settled_.load(std::memory_order_acquire);  // first: see Session::pendingIn
    return recorded_.load(std::memory_order_acquire) - settled;
  }
  // Single launches recorded, and settled, since construction. A flush waits until as many
  // are settled as had been recorded when it began, not until none is outstanding: threads
  // that keep launching meanwhile would hold that off until its deadline.
  int64_t recordedSoFar() const { return recorded_.load(std::memory_order_acquire); }
  int64_t settledSoFar() const { return settled_.load(std::memory_order_acquire); }
  size_t capacity() const { return mask_ + 1; }

 public:
  struct Slot {
    std::atomic<uint64_t> key{0};      // correlation + 1; 0 = empty; kBusy while written
    std::atomic<uint64_t> meta{0};     // count | multi << 8 | named << 16+i | name << 32
    std::atomic<uint64_t> settled{0};  // key of the last launch in this slot already settled
    std::atomic<uint64_t> launchNs{0};
    std::atomic<uint64_t> threadId{0};
    std::atomic<uint64_t> words[2 * LaunchInfo::kMaxEntries];  // session*, phase << 32 | node
  };

 private:
  static constexpr uint64_t kBusy = ~uint64_t(0);

  Slot *find(uint64_t key);
  Slot &claim(uint64_t key);  // the key's slot, its key set to kBusy
  void dropUnsettled(Slot &slot, uint64_t old);
  bool read(const Slot &slot, uint64_t key, LaunchInfo &out) const;
  void settle(Slot &slot, uint64_t key, const LaunchInfo &info);

  std::unique_ptr<Slot[]> slots_;
  size_t mask_;
  // recorded_ is raised by launching threads, settled_ by the record thread: on separate
  // cache lines, so neither side's update takes the line from the other.
  alignas(64) std::atomic<int64_t> recorded_{0};
  alignas(64) std::atomic<int64_t> settled_{0};
};

}  // namespace proton
