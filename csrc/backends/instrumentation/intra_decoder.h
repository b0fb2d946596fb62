// Intra-kernel decoding: turns the device buffers that instrumented kernels wrote (layouts in
// ptx_rewrite.h) into metrics under each launch's kernel node and, for trace sessions, into
// per-warp slices.
//
//   ScopeTables tables;  tables.add(decodeTable(metadataText).value());
//   IntraDecoder decoder(tables);
//   decoder.fileTree(reduced, launch);  // one launch's reduced tree slot, after it ran
//
// Tree: the kernel node gets `cycles` (sum over recording warps) and `normalized_cycles`
// (per recording warp); each scope is a child (nested scopes nested) with `cycles`,
// `normalized_cycles` and `count`. The cycle metrics are exclusive (readers do not add them into
// parents): each node's are what its own scope measured, its children's included. Trace: one slice
// per scope execution on the lane "CTA <c> Warp <w>" of the launch's GPU, in ns on the kernel's own
// clock (aligned so that the earliest warp starts when the kernel's record says it started), with
// `sm` and `cycles` in its args; tree sessions fed from trace buffers get the same sums as above.
// Losses are counted: events overwritten in a circular buffer, unmatched or crossing
// enter/exit pairs (also per kernel, with one warning per kernel), buffers with no table.
//
// ScopeTables is thread-safe; IntraDecoder is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/instrumentation/ptx_rewrite.h"
#include "core/ids.h"
#include "core/profile_data.h"

namespace proton {
class Session;
}

namespace proton::instrumentation {

// A registered table with its names interned once: per scope id, the names from the kernel
// down to the scope (empty for id 0), and the name its slices carry.
struct InternedTable {
  ScopeTable table;
  std::vector<std::vector<StringId>> paths;
  std::vector<StringId> sliceNames;
};

class ScopeTables {
 public:
  void add(ScopeTable table);
  // The table with this hash; nullptr if none was registered. Tables are never removed.
  std::shared_ptr<const InternedTable> find(uint32_t hash) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<const InternedTable>> tables_;
};

// Where one launch's data goes in one session.
struct IntraTarget {
  Session *session = nullptr;
  PhaseId phase;
  NodeId kernelNode;
};

// One event of proton/instrument.cuh (its Event layout, 48 bytes).
struct NativeEvent {
  uint64_t grid;         // %gridid of the launch
  uint64_t name;         // device address of the scope's name
  uint64_t clock;        // %clock64
  uint64_t globaltimer;  // ns
  uint32_t cta;
  uint32_t where;  // sm << 16 | warp << 1 | exit
  uint64_t pad;
};
static_assert(sizeof(NativeEvent) == 48, "layout shared with proton/instrument.cuh");

// A launch's trace slot as read back: units of `stride` bytes, each a unit's header then the
// first (stride - kTraceUnitHeaderBytes) / 8 places of its event buffer. The stride is the
// layout's unit size where whole units were read back, less where only the places the units
// wrote were (all of them when none wrote more than that).
struct TraceSlotView {
  const uint8_t *data = nullptr;
  size_t size = 0;
  uint32_t unitBytes = 0;  // the layout's unit size (the mode's buffer_size)
  uint32_t stride = 0;
};

struct IntraLaunch {
  const IntraTarget *targets = nullptr;
  size_t numTargets = 0;
  int32_t device = 0;
  uint64_t kernelStartNs = 0;  // from the kernel's own record; 0 if unknown
  double cyclesPerNs = 0;      // fallback clock when warps ran too briefly to measure it
};

// The host's version of the GPU tree reduction (backends/cupti/tree_reduce.cu): sums the
// unit records of one launch's tree slot (`size` bytes) into `out` (kReducedTreeBytes).
// False for a slot whose header is malformed (out then holds only its hash).
bool reduceTreeSlot(const uint8_t *slot, size_t size, uint8_t *out);

class IntraDecoder {
 public:
  explicit IntraDecoder(const ScopeTables &tables);

  // `reduced`: kReducedTreeBytes, as reduceTreeSlot or the GPU reduction makes them.
  void fileTree(const uint8_t *reduced, const IntraLaunch &launch);
  void fileTrace(const TraceSlotView &slot, const IntraLaunch &launch);
  void fileTrace(const uint8_t *slot, size_t size, uint32_t unitBytes, const IntraLaunch &launch) {
    fileTrace(TraceSlotView{slot, size, unitBytes, unitBytes}, launch);
  }
  // One launch's events from proton/instrument.cuh, in the order they were written: enters
  // and exits are paired per warp, nesting taken from the order; `nameOf` reads a name.
  void fileNative(const NativeEvent *events, size_t n, const std::string &kernel,
                  const std::function<StringId(uint64_t)> &nameOf, const IntraLaunch &launch);
  // Trace slices filed so far; beyond `maxEvents` they are dropped and counted.
  void setMaxTraceEvents(uint64_t maxEvents) { maxEvents_ = maxEvents; }
  uint64_t maxTraceEvents() const { return maxEvents_; }
  bool traceFull() const { return events_ >= maxEvents_; }
  // A launch recorded before the trace reached its cap and drained after: nothing of it would
  // be kept (no tree session takes its sums), so it is counted and not walked (nor read back).
  bool pastTraceCap(const IntraLaunch &launch);
  // The slices that fileTrace would make of a slot for each trace session (before the cap),
  // counting no loss: of all of it, or of the CTAs in its part-th of `parts` equal parts (the
  // parts add up to the whole). Reads only the tables: may run beside another thread's filing.
  uint64_t countTraceSlices(const TraceSlotView &slot, size_t part = 0, size_t parts = 1) const;
  uint64_t countTraceSlices(const uint8_t *slot, size_t size, uint32_t unitBytes, size_t part = 0,
                            size_t parts = 1) const {
    return countTraceSlices(TraceSlotView{slot, size, unitBytes, unitBytes}, part, parts);
  }
  // A new recording begins (the first instrumentation session after none): its trace gets
  // the whole cap, and its losses are told again. Sessions open at the same time share one
  // recording, and so the cap.
  void startAnew() {
    events_ = 0;
    warned_.clear();
  }

 private:
  struct ScopeSums {
    uint64_t cycles = 0;
    uint64_t count = 0;
    uint64_t warps = 0;
  };
  struct Unit;
  class TraceClock;
  struct TraceTally;
  struct TraceSlot;
  struct Losses;

  // launches: how many launches the sums hold (a CUDA graph's replays added into one slot).
  void fileSums(const InternedTable &table, const std::vector<ScopeSums> &sums, uint32_t launches,
                const IntraLaunch &launch);
  // The table of a slot's first unit that recorded: null if none did, or (`unknown`) if its
  // hash has no table.
  std::shared_ptr<const InternedTable> traceTableOf(const TraceSlotView &slot, bool *unknown) const;
  // A trace slot's table and units; false for one with no units, no table or another
  // layout (those two counted in the stats where countLosses).
  bool readTraceSlot(const TraceSlotView &slot, TraceSlot &out, bool countLosses) const;
  // Walks one unit's kept events in order: onClose(scope id, begin clock, end clock) for each
  // scope execution, its kernel scope last; onHalf(scope id, clock, end) for an event's start
  // left open at the return, or its end with no start in the unit (a half of a cross-warp
  // event, for linkEvents); what it cannot pair goes into `losses`.
  template <typename OnClose, typename OnHalf>
  static void walkTraceUnit(const ScopeTable &table, const uint8_t *header, uint32_t stride,
                            Losses &losses, OnClose &&onClose, OnHalf &&onHalf);
  // An event's start in one warp and its end in another (Gluon's warp_specialize): within a
  // CTA, the starts of one event ordered by (warp, time) are paired with its ends in the same
  // order, the k-th with the k-th; each pair becomes two zero-length slices sharing a link.
  struct Half {
    uint32_t cta, warp, sm, scope;
    uint64_t ns;
    bool end;
  };
  void linkEvents(const InternedTable &interned, std::vector<Half> &halves,
                  const IntraLaunch &launch, Losses &losses);
  void fileTraceUnit(const InternedTable &interned, const Unit &unit, size_t index, uint32_t stride,
                     const TraceClock &clock, const IntraLaunch &launch, TraceTally &tally);
  NodeId scopeNode(Session &s, PhaseId phase, NodeId kernelNode, const std::vector<StringId> &path);
  // One slice of the launch for each of its trace sessions, batched until fileSlices. `scope`
  // (a table's scope id, or kNoScopeId) keys the node cache: a table's path is resolved once
  // per launch and session, not once per slice.
  static constexpr size_t kNoScopeId = SIZE_MAX;
  // link (nonzero): the slice is one end of a cross-warp event (linkEnd: its end).
  void addSlice(const IntraLaunch &launch, const std::vector<StringId> &path, size_t scope,
                StringId name, uint32_t cta, uint32_t warp, uint32_t sm, uint64_t beginNs,
                uint64_t endNs, uint64_t cycles, uint64_t link = 0, bool linkEnd = false);
  // Starts a launch's batch (clears the node cache) and files it, one call per session.
  void beginSlices(const IntraLaunch &launch, size_t scopes);
  // The kernel start a trace launch is aligned to: its record's, or for a launch without one,
  // its first unit start (base + earliest, by %globaltimer) moved by the device's known offset.
  uint64_t kernelStart(const IntraLaunch &launch, uint64_t base, double earliest);
  void fileSlices(const IntraLaunch &launch);
  // What a launch's buffers lost, counted in the stats table (in total and per kernel) and
  // reported in one warning per kernel.
  struct Losses {
    uint64_t unmatched = 0;    // exits with no open enter, and scopes open at the return
    uint64_t crossing = 0;     // scopes closed by an enclosing scope's exit
    uint64_t overwritten = 0;  // trace events written over in a full circular buffer
  };
  void noteLosses(const ScopeTable &table, const Losses &losses);
  void noteDroppedMarkers(const ScopeTable &table);

  const ScopeTables &tables_;
  uint64_t maxEvents_ = 1u << 22;
  uint64_t events_ = 0;
  uint64_t capped_ = 0;                           // slices of the launch past the cap
  std::vector<std::vector<TraceEvent>> batches_;  // by target
  size_t cachedScopes_ = 0;
  std::vector<NodeId> nodes_;  // by target * cachedScopes_ + scope id
  std::vector<uint8_t> resolved_;
  std::set<std::string> warned_;
  // Per device: a kernel record's start minus its launch's first unit start by %globaltimer,
  // to place launches that have no record of their own (CUDA graph replays) on the same clock.
  std::unordered_map<int32_t, int64_t> kernelMinusGpuNs_;
};

}  // namespace proton::instrumentation
