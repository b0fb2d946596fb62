// NativeScopes: scopes in CUDA C++ kernels built with proton/instrument.cuh.
//
//   scopes.start(driver);                          // an instrumentation session began
//   if (scopes.active())                           // every driver launch (cheap when not ours)
//     scopes.onLaunch(function, context, contextId, symbol, correlation, entries, n);
//   scopes.noteKernel(record, filedUnder, n, name); // its record: grid id -> launch
//   scopes.beforeSync();                           // a flush begins (before it synchronises)
//   scopes.drain(synced);                          // after flush: read events back, file them
//
// Each CUDA module compiled with the header has a global `proton_instrument_control`. When a
// kernel of such a module is launched in a session, Proton points that global at its
// context's control block (events buffer, capacity, claim counter), once per module; the
// kernel's warps then append enter/exit events tagged with %gridid, which the kernel's (CUPTI)
// record maps back to the launch and so to the context it was launched in. When the last
// session ends the module globals are set back to null (one predicated-off load per scope).
//
// A drain reads a context's events from the first one not filed yet up to the claim counter,
// and then empties the buffer (zeroed, the counter back to 0), unless a kernel may still be
// appending: one launched (or a CUDA graph launched) since the flush began, or any in a context the
// flush did not synchronise (a capture was under way there). A claimed event may then not be
// written yet, or be half-written, so the buffer is kept and only events of finished launches
// (their record came, with an end) are filed; the others are read again, whole, by the next drain.
//
// Every copy to or from the GPU goes through a non-blocking stream of Proton's own per context,
// in relaxed capture mode: a module's first launch may be one being captured into a CUDA graph,
// and a synchronous copy (on the legacy stream, which waits for blocking streams) or a
// global-mode allocation there would end the capture.
//
// Thread-safe: launches of modules already looked up on a thread take no lock; the first
// launch of a module on a thread, launches of instrumented modules, records and drains take
// one mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/instrumentation/intra_decoder.h"
#include "backends/kernel_attributor.h"
#include "backends/launch_table.h"

namespace proton::gpu {

class NativeScopes {
 public:
  static NativeScopes &global();

  void start(const Driver *driver);
  void stop();
  // An instrumentation session runs: launches are looked at (one relaxed load).
  bool active() const { return active_.load(std::memory_order_acquire); }
  // A driver-level launch of `function` in `context` (contextId: the vendor's id of it, as
  // kernel records carry it; symbol: the kernel's name); `correlation` is the outermost call's
  // (a runtime launch's).
  void onLaunch(Function function, Context context, uint32_t contextId, const char *symbol,
                uint64_t correlation, const LaunchEntry *entries, size_t n);
  // A graph launch: it may run kernels of instrumented modules.
  void onGraphLaunch();
  // A kernel record, with the nodes it was filed under (KernelAttributor::RecordObserver): a
  // kernel replayed from a CUDA graph, which no launch callback saw, is found by its name.
  // Never waits for the drains' lock (CUPTI's record thread calls it holding CUPTI's own
  // locks, which a drain's driver calls may take): during a drain the record is kept aside,
  // and the next drain takes it first.
  void noteKernel(const KernelRecord &record, const LaunchEntry *filedUnder, size_t n,
                  StringId launchName);
  void beforeSync();
  // synced: the contexts the flush synchronised.
  void drain(const std::vector<Context> &synced);
  // A context is about to be destroyed (its resource callback, on the destroying thread): its
  // events are read back while they can be, with their scopes' names, for the next drain to
  // file; its buffers go with it, and modules loaded into it again are instrumented again.
  void onContextDestroying(Context context);
  // A module or library is about to be unloaded (cuModuleUnload / cuLibraryUnload, API enter,
  // on the unloading thread): the names of its events not filed yet are read while its memory
  // is there (another module loaded later may put other names, or its own global, at the same
  // addresses), and a module loaded later under the same handle is set up again.
  void onModuleUnloading(const void *code);

  static constexpr uint64_t kEventsPerContext = uint64_t{1} << 20;  // 48 MB

 private:
  struct Control {  // proton::device::Control
    DevicePtr events;
    uint64_t capacity;
    uint64_t head;
  };
  struct ContextBuffers {
    Context context = nullptr;
    uint32_t contextId = 0;  // the vendor's, as kernel records carry it
    int device = 0;
    double cyclesPerNs = 0;
    DevicePtr control = 0;
    DevicePtr events = 0;
    Stream stream = nullptr;  // Proton's own, non-blocking: every copy
    uint64_t read = 0;  // events before it filed by earlier drains since the buffer was emptied
    std::vector<uint64_t> filedPast;  // ascending: indices past `read` filed already
    uint64_t lostCounted = 0;  // claims past the capacity counted as lost since it was emptied
  };
  struct Launch {
    StringId symbol;      // the kernel's (mangled) name
    StringId launchName;  // the frame of entries that are `named`
    uint64_t startNs = 0;
    bool finished = false;  // its record came with an end: every event of it is written
    uint32_t numEntries = 0;
    LaunchEntry entries[LaunchInfo::kMaxEntries];
  };

  // Events read back from a destroyed context, with the names they use, to be filed.
  struct Orphaned {
    std::vector<instrumentation::NativeEvent> events;
    std::unordered_map<uint64_t, StringId> names;  // by the name's device address
    uint32_t contextId = 0;
    int device = 0;
    double cyclesPerNs = 0;
  };

  // mu_ held; contextId: the vendor's id of `context`.
  bool instrumentModule(const void *code, bool library, Context context, uint32_t contextId);
  ContextBuffers *buffersFor(Context context, uint32_t contextId);  // mu_ held
  StringId nameAt(const ContextBuffers &b, uint64_t address);       // mu_ held, b's context current
  // mu_ held, b's context current, relaxed capture mode: copies on b's stream, waited for.
  bool toDevice(const ContextBuffers &b, DevicePtr to, const void *from, size_t bytes);
  bool fromDevice(const ContextBuffers &b, void *to, DevicePtr from, size_t bytes);
  // mu_ held, b's context current: its first `count` event places zeroed.
  void zeroEvents(const ContextBuffers &b, uint64_t count);
  // mu_ held, b's context current: its events not filed yet appended to `events`, all of them
  // and the buffer emptied if `empty` (no kernel can be appending to it); otherwise only those
  // of launches whose record has come, the others left on the GPU for the next drain.
  bool readEvents(ContextBuffers &b, std::vector<instrumentation::NativeEvent> &events, bool empty);
  // mu_ held: the launch of grid `grid` in context `contextId` (the vendor's), or nullptr while its
  // record has not come.
  const Launch *launchOf(uint32_t contextId, uint64_t grid) const;
  // mu_ held: events filed by launch, each launch's in the order they were written; those of
  // launches with no record are counted as unattributed.
  // nameOf(grid, address): the name at `address` as launch `grid` saw it.
  using NameOf = std::function<StringId(uint64_t grid, uint64_t address)>;
  void fileEvents(std::vector<instrumentation::NativeEvent> &events, uint32_t contextId, int device,
                  double cyclesPerNs, const NameOf &nameOf);
  // mu_ held, b's context current: the names of b's events not filed yet, kept by launch
  // (unloadedNames_), and the names read so far in b's context forgotten.
  void keepPendingNames(ContextBuffers &b);
  // mu_ held: a name kept for launch `grid` of context `contextId` at unload, or null.
  StringId unloadedName(uint32_t contextId, uint64_t grid, uint64_t address) const;
  void forgetUnloadedNames(uint32_t contextId);  // mu_ held: its events were all filed

  std::atomic<bool> active_{false};
  std::atomic<bool> anyModule_{false};  // a module is set up to record (graph launches count)
  std::atomic<uint64_t> generation_{1};
  uint64_t launches_ = 0;         // mu_: instrumented launches seen
  uint64_t launchesAtFlush_ = 0;  // mu_: launches_ when the flush began
  const Driver *driver_ = nullptr;
  std::mutex mu_;
  // Records noted while mu_ was held, for the next holder that reads events (keptMu_ is
  // never held across anything).
  struct KeptRecord {
    KernelRecord record;
    StringId launchName;
    uint32_t numEntries = 0;
    LaunchEntry entries[LaunchInfo::kMaxEntries];
  };
  std::mutex keptMu_;
  std::vector<KeptRecord> kept_;
  void noteKernelLocked(const KernelRecord &record, const LaunchEntry *filedUnder, size_t n,
                        StringId launchName);  // mu_ held
  void applyKeptLocked();                      // mu_ held
  // Instrumented module or library -> its global's address (in the context it was seen in).
  std::map<std::pair<const void *, Context>, DevicePtr> modules_;
  std::vector<ContextBuffers> contexts_;
  std::unordered_map<uint64_t, Launch> byCorrelation_;
  // By (context, grid id): %gridid numbers launches per context (PTX's definition; an H100
  // numbered a second context's launches on from the first's), so two GPUs reuse the same ids.
  // `context` is the vendor's id (CUPTI's context uid), which is never reused.
  struct GridKey {
    uint32_t context;
    int64_t grid;
    bool operator==(const GridKey &) const = default;
  };
  struct GridKeyHash {
    size_t operator()(const GridKey &k) const {
      return std::hash<int64_t>{}(k.grid) ^ (static_cast<size_t>(k.context) << 40);
    }
  };
  std::unordered_map<GridKey, Launch, GridKeyHash> byGrid_;
  // Kernels of instrumented modules seen launched (captured into graphs too), by name: their
  // replays' records are matched to the nodes they were filed under.
  std::unordered_set<std::string> instrumentedKernels_;
  std::map<std::pair<Context, uint64_t>, StringId> names_;
  // Names of events that were not filed when their module was unloaded, by (the vendor's context
  // id, grid, address): grid ids are not reused within a context, addresses are.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, StringId> unloadedNames_;
  std::vector<Orphaned> orphaned_;
  instrumentation::ScopeTables noTables_;
  instrumentation::IntraDecoder decoder_{noTables_};
};

}  // namespace proton::gpu
