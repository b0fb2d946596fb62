#include "backends/gpu/native_scopes.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "core/thread_cache.h"

namespace proton::gpu {
namespace {

constexpr const char *kControlSymbol = "proton_instrument_control";

// Modules this thread has already looked at in the current generation: their launches
// need no lock when they are not instrumented.
struct ModuleCache {
  uint64_t generation = 0;
  std::vector<std::pair<const void *, bool>> modules;
};

Counter &stat(const char *name) { return Stats::global().counter(name); }

}  // namespace

NativeScopes &NativeScopes::global() {
  static NativeScopes *scopes = new NativeScopes();  // outlives exit handlers
  return *scopes;
}

void NativeScopes::start(const Driver *driver) {
  std::lock_guard lock(mu_);
  driver_ = driver;
  for (const char *name :
       {"instrumentation_native_events_lost", "instrumentation_native_events_unattributed",
        "instrumentation_native_modules", "instrumentation_native_launches"})
    stat(name);
  generation_.fetch_add(1, std::memory_order_release);
  active_.store(true, std::memory_order_release);
}

void NativeScopes::stop() {
  std::lock_guard lock(mu_);
  active_.store(false, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  // Modules stop recording: their control pointer goes back to null.
  RelaxedCaptureMode relaxed(*driver_);
  for (const auto &entry : modules_) {
    const Context context = entry.first.second;
    auto b = std::find_if(contexts_.begin(), contexts_.end(),
                          [&](const ContextBuffers &c) { return c.context == context; });
    if (b == contexts_.end()) continue;
    ContextScope scope(*driver_, b->context, /*current=*/false);
    const DevicePtr null = 0;
    if (scope.ok()) toDevice(*b, entry.second, &null, sizeof(null));  // unloaded: error ignored
  }
  modules_.clear();
  anyModule_.store(false, std::memory_order_release);
}

bool NativeScopes::toDevice(const ContextBuffers &b, DevicePtr to, const void *from, size_t bytes) {
  return driver_->memcpyHtoDAsync(to, from, bytes, b.stream) == kSuccess &&
         driver_->streamSynchronize(b.stream) == kSuccess;
}

bool NativeScopes::fromDevice(const ContextBuffers &b, void *to, DevicePtr from, size_t bytes) {
  return driver_->memcpyDtoHAsync(to, from, bytes, b.stream) == kSuccess &&
         driver_->streamSynchronize(b.stream) == kSuccess;
}

NativeScopes::ContextBuffers *NativeScopes::buffersFor(Context context, uint32_t contextId) {
  for (ContextBuffers &b : contexts_)
    if (b.context == context) return &b;
  ContextBuffers b;
  b.context = context;
  b.contextId = contextId;
  Device device = 0;
  if (driver_->ctxGetDevice(&device) != kSuccess) return nullptr;
  b.device = static_cast<int>(device);
  int khz = 0;
  if (driver_->deviceClockRateKhz(&khz, device) == kSuccess) b.cyclesPerNs = khz / 1e6;
  size_t bytes = kEventsPerContext * sizeof(instrumentation::NativeEvent);
  bool ok = driver_->memAlloc(&b.events, bytes) == kSuccess &&
            driver_->memAlloc(&b.control, sizeof(Control)) == kSuccess &&
            driver_->streamCreate(&b.stream, kStreamNonBlocking) == kSuccess;
  Control control{b.events, kEventsPerContext, 0};
  if (ok) zeroEvents(b, kEventsPerContext);  // a claimed place not written yet reads as grid 0
  if (!ok || !toDevice(b, b.control, &control, sizeof(control))) {
    if (b.events) driver_->memFree(b.events);
    if (b.control) driver_->memFree(b.control);
    return nullptr;  // (a stream made is not destroyed: that would call back into Proton)
  }
  contexts_.push_back(b);
  return &contexts_.back();
}

bool NativeScopes::instrumentModule(const void *code, bool library, Context context,
                                    uint32_t contextId) {
  if (modules_.count({code, context})) return true;
  DevicePtr address = 0;
  size_t bytes = 0;
  DriverResult rc = library
                        ? driver_->libraryGetGlobal(&address, &bytes, (Library)code, kControlSymbol)
                        : driver_->moduleGetGlobal(&address, &bytes, (Module)code, kControlSymbol);
  if (rc != kSuccess || bytes != sizeof(DevicePtr)) return false;
  RelaxedCaptureMode relaxed(*driver_);  // this launch may be one being captured
  ContextBuffers *b = buffersFor(context, contextId);
  if (!b || !toDevice(*b, address, &b->control, sizeof(b->control))) return false;
  modules_[{code, context}] = address;
  stat("instrumentation_native_modules").add();
  anyModule_.store(true, std::memory_order_release);
  return true;
}

void NativeScopes::onGraphLaunch() {
  if (!active_.load(std::memory_order_acquire)) return;
  // A replay may run kernels of instrumented modules: a drain must not empty a buffer that
  // they may still be appending to. (Its kernels' records find their launches by name.)
  if (!anyModule_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  ++launches_;
}

void NativeScopes::onLaunch(Function function, Context context, uint32_t contextId,
                            const char *symbol, uint64_t correlation, const LaunchEntry *entries,
                            size_t n) {
  if (!active_.load(std::memory_order_acquire)) return;
  if (!function) return;
  // A function of a module (driver API), or a kernel of a library (the CUDA runtime's).
  const void *module = nullptr;
  bool library = false;
  Module m = nullptr;
  Library l = nullptr;
  if (driver_->funcGetModule(&m, function) == kSuccess && m) {
    module = m;
  } else if (driver_->kernelGetLibrary && driver_->libraryGetGlobal &&
             driver_->kernelGetLibrary(&l, function) == kSuccess && l) {
    module = l;
    library = true;
  } else {
    return;
  }
  ModuleCache *cache = ThreadCache<ModuleCache>::get();  // none at exit
  bool known = false;
  if (cache) {
    uint64_t generation = generation_.load(std::memory_order_acquire);
    if (cache->generation != generation) *cache = ModuleCache{generation, {}};
    auto it = std::find_if(cache->modules.begin(), cache->modules.end(),
                           [&](const auto &m) { return m.first == module; });
    if (it != cache->modules.end() && !it->second) return;  // not instrumented: no lock
    known = it != cache->modules.end();
  }
  std::lock_guard lock(mu_);
  // The session may have ended since the check above: a module set up now would record
  // outside any session (stop() has pointed the others back at null).
  if (!active_.load(std::memory_order_acquire)) return;
  bool instrumented = instrumentModule(module, library, context, contextId);
  if (cache && !known) cache->modules.push_back({module, instrumented});
  if (!instrumented) return;
  Launch launch;
  // Kept as text: the vendor's string goes with the module, which may be unloaded before a
  // drain.
  launch.symbol = StringTable::global().intern(symbol ? symbol : "");
  launch.numEntries = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
  std::copy(entries, entries + launch.numEntries, launch.entries);
  byCorrelation_[correlation] = launch;
  ++launches_;
  if (symbol) instrumentedKernels_.insert(symbol);
  stat("instrumentation_native_launches").add();
}

void NativeScopes::noteKernel(const KernelRecord &record, const LaunchEntry *filedUnder, size_t n,
                              StringId launchName) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock) {  // a drain holds it, maybe waiting (in the driver) for this thread's CUPTI
    KeptRecord k;
    k.record = record;
    k.launchName = launchName;
    k.numEntries = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
    std::copy(filedUnder, filedUnder + k.numEntries, k.entries);
    std::lock_guard kept(keptMu_);
    kept_.push_back(k);
    return;
  }
  applyKeptLocked();
  noteKernelLocked(record, filedUnder, n, launchName);
}

void NativeScopes::applyKeptLocked() {
  std::vector<KeptRecord> records;
  {
    std::lock_guard kept(keptMu_);
    if (kept_.empty()) return;
    records.swap(kept_);
  }
  for (const KeptRecord &k : records)
    noteKernelLocked(k.record, k.entries, k.numEntries, k.launchName);
}

void NativeScopes::noteKernelLocked(const KernelRecord &record, const LaunchEntry *filedUnder,
                                    size_t n, StringId launchName) {
  auto it = byCorrelation_.find(record.correlation);
  if (it != byCorrelation_.end()) {
    it->second.startNs = record.startNs;
    it->second.finished = record.timed();
    byGrid_[{record.context, record.gridId}] = it->second;
    byCorrelation_.erase(it);
    return;
  }
  // A graph's replay of a kernel of an instrumented module: its events go where its record
  // went, <replay context>/<captured_at>/<capture context>/<kernel>.
  if (record.graphNodeId == 0 || n == 0 || !record.name || !instrumentedKernels_.count(record.name))
    return;
  Launch launch;
  launch.symbol = StringTable::global().intern(record.name);
  launch.launchName = launchName;
  launch.startNs = record.startNs;
  launch.finished = record.timed();
  launch.numEntries = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
  std::copy(filedUnder, filedUnder + launch.numEntries, launch.entries);
  byGrid_[{record.context, record.gridId}] = launch;
}

StringId NativeScopes::nameAt(const ContextBuffers &b, uint64_t address) {
  // A name literal lies in its module's global memory, which may end right after it: read
  // 16 bytes at a time while that works, then byte by byte.
  char text[128] = {0};
  size_t got = 0;
  while (got < sizeof(text) - 1 && !std::memchr(text, 0, got)) {
    size_t step = got + 16 < sizeof(text) && fromDevice(b, text + got, address + got, 16) ? 16 : 0;
    if (step == 0 && !fromDevice(b, text + got, address + got, 1)) break;
    got += step ? step : 1;
  }
  text[sizeof(text) - 1] = 0;
  return StringTable::global().intern(text[0] ? text : "<unnamed scope>");
}

bool NativeScopes::readEvents(ContextBuffers &b, std::vector<instrumentation::NativeEvent> &events,
                              bool empty) {
  Control control{};
  if (!fromDevice(b, &control, b.control, sizeof(control))) return false;
  const uint64_t n = std::min<uint64_t>(control.head, control.capacity);
  // Past the capacity nothing more is written: counted (each claim once, while the buffer
  // stays full), and the buffer is emptied by the next drain that no kernel can be appending
  // to; emptied under a running kernel, claims made meanwhile would be lost uncounted.
  if (control.head > n) {
    stat("instrumentation_native_events_lost").add(control.head - n - b.lostCounted);
    b.lostCounted = control.head - n;
  }
  bool copied = true;
  std::vector<instrumentation::NativeEvent> read;
  if (n > b.read) {
    read.resize(n - b.read);
    copied = fromDevice(b, read.data(), b.events + b.read * sizeof(read[0]),
                        (n - b.read) * sizeof(read[0]));
    if (!copied) {  // lost, all that were not filed yet
      stat("instrumentation_native_events_lost").add(n - b.read - b.filedPast.size());
      read.clear();
      b.read = n;
      b.filedPast.clear();
    }
  }
  // Taken: every event not filed before, or (while a kernel may still be appending) only
  // those of finished launches; the first one left is where the next drain reads from.
  std::vector<uint64_t> filed;
  filed.swap(b.filedPast);
  size_t past = 0;
  uint64_t firstLeft = n;
  for (uint64_t i = b.read; i < b.read + read.size(); ++i) {
    if (past < filed.size() && filed[past] == i) {
      ++past;
      if (firstLeft < n) b.filedPast.push_back(i);  // still past where the next drain reads
      continue;
    }
    const instrumentation::NativeEvent &e = read[i - b.read];
    const Launch *launch = launchOf(b.contextId, e.grid);
    if (empty || (launch && launch->finished)) {
      events.push_back(e);
      if (firstLeft < n) b.filedPast.push_back(i);
    } else if (firstLeft == n) {
      firstLeft = i;
    }
  }
  b.read = firstLeft;
  if (empty) {
    // Zeroed: a place claimed and not yet written reads as no launch's (grid 0), not as the
    // event an earlier launch left there.
    if (n) zeroEvents(b, n);
    control.head = 0;
    b.read = 0;
    b.lostCounted = 0;
    b.filedPast.clear();
    toDevice(b, b.control, &control, sizeof(control));
  }
  return copied;
}

const NativeScopes::Launch *NativeScopes::launchOf(uint32_t contextId, uint64_t grid) const {
  auto found = byGrid_.find({contextId, static_cast<int64_t>(grid)});
  return found == byGrid_.end() ? nullptr : &found->second;
}

void NativeScopes::fileEvents(std::vector<instrumentation::NativeEvent> &events, uint32_t contextId,
                              int device, double cyclesPerNs, const NameOf &nameOf) {
  std::stable_sort(events.begin(), events.end(),
                   [](const auto &a, const auto &c) { return a.grid < c.grid; });
  for (size_t i = 0; i < events.size();) {
    size_t j = i;
    while (j < events.size() && events[j].grid == events[i].grid) ++j;
    const Launch *launch = launchOf(contextId, events[i].grid);
    if (!launch) {
      stat("instrumentation_native_events_unattributed").add(j - i);
    } else {
      const Launch &l = *launch;
      instrumentation::IntraTarget targets[LaunchInfo::kMaxEntries];
      size_t gone = 0;
      size_t t = kernelTargets(l.entries, l.numEntries, l.symbol, l.launchName, targets, &gone);
      if (t == 0 && gone) {  // every session that recorded the launch has ended
        stat("instrumentation_native_events_unattributed").add(j - i);
      } else {
        instrumentation::IntraLaunch where{targets, t, device, l.startNs, cyclesPerNs};
        const uint64_t grid = events[i].grid;
        decoder_.fileNative(
            events.data() + i, j - i,
            readableKernelName(std::string(StringTable::global().view(l.symbol)).c_str()),
            [&](uint64_t address) { return nameOf(grid, address); }, where);
      }
    }
    i = j;
  }
}

void NativeScopes::beforeSync() {
  std::lock_guard lock(mu_);
  launchesAtFlush_ = launches_;
}

void NativeScopes::drain(const std::vector<Context> &synced) {
  std::lock_guard lock(mu_);
  if (!driver_) return;
  applyKeptLocked();
  RelaxedCaptureMode relaxed(*driver_);
  // A kernel launched since the flush began (on another thread), or any kernel of a context the
  // flush did not synchronise, may still be appending: those buffers are not emptied under it.
  // Launches wait for this lock from here on.
  const bool noneLaunched = launches_ == launchesAtFlush_;
  bool allEmptied = true;
  for (ContextBuffers &b : contexts_) {
    ContextScope scope(*driver_, b.context, /*current=*/false);
    if (!scope.ok()) continue;
    const bool empty =
        noneLaunched && std::find(synced.begin(), synced.end(), b.context) != synced.end();
    allEmptied &= empty;
    std::vector<instrumentation::NativeEvent> events;
    readEvents(b, events, empty);
    fileEvents(events, b.contextId, b.device, b.cyclesPerNs, [&](uint64_t grid, uint64_t address) {
      if (StringId kept = unloadedName(b.contextId, grid, address); kept != StringId{}) return kept;
      auto key = std::make_pair(b.context, address);
      auto found = names_.find(key);
      if (found != names_.end()) return found->second;
      return names_[key] = nameAt(b, address);
    });
    if (empty) forgetUnloadedNames(b.contextId);
  }
  for (Orphaned &o : orphaned_) {
    fileEvents(o.events, o.contextId, o.device, o.cyclesPerNs,
               [&](uint64_t grid, uint64_t address) {
                 if (StringId kept = unloadedName(o.contextId, grid, address); kept != StringId{})
                   return kept;
                 auto found = o.names.find(address);
                 return found != o.names.end() ? found->second
                                               : StringTable::global().intern("<unnamed scope>");
               });
    forgetUnloadedNames(o.contextId);
  }
  orphaned_.clear();
  // Launches not known to be finished may have events still to be read; kept until then.
  if (allEmptied)
    byGrid_.clear();
  else
    std::erase_if(byGrid_, [](const auto &entry) { return entry.second.finished; });
}

StringId NativeScopes::unloadedName(uint32_t contextId, uint64_t grid, uint64_t address) const {
  if (unloadedNames_.empty()) return StringId{};
  auto found = unloadedNames_.find({contextId, grid, address});
  return found == unloadedNames_.end() ? StringId{} : found->second;
}

void NativeScopes::forgetUnloadedNames(uint32_t contextId) {
  std::erase_if(unloadedNames_, [&](const auto &n) { return std::get<0>(n.first) == contextId; });
}

void NativeScopes::onModuleUnloading(const void *code) {
  if (!anyModule_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (!driver_) return;
  bool any = false;
  for (auto m = modules_.begin(); m != modules_.end();) {
    if (m->first.first != code) {
      ++m;
      continue;
    }
    any = true;
    auto b = std::find_if(contexts_.begin(), contexts_.end(),
                          [&](const ContextBuffers &c) { return c.context == m->first.second; });
    if (b != contexts_.end()) {
      RelaxedCaptureMode relaxed(*driver_);
      ContextScope scope(*driver_, b->context, /*current=*/false);
      if (scope.ok()) keepPendingNames(*b);
    }
    m = modules_.erase(m);  // stop() must not write where its global was
  }
  if (any) generation_.fetch_add(1, std::memory_order_release);  // threads look modules up again
}

void NativeScopes::keepPendingNames(ContextBuffers &b) {
  Control control{};
  if (!fromDevice(b, &control, b.control, sizeof(control))) return;
  const uint64_t n = std::min<uint64_t>(control.head, control.capacity);
  if (n > b.read) {
    std::vector<instrumentation::NativeEvent> pending(n - b.read);
    if (fromDevice(b, pending.data(), b.events + b.read * sizeof(pending[0]),
                   pending.size() * sizeof(pending[0]))) {
      std::map<uint64_t, StringId> read;  // this unload's, by address
      for (const instrumentation::NativeEvent &e : pending) {
        if (e.grid == 0) continue;  // claimed, not written
        auto [at, fresh] = read.try_emplace(e.name);
        if (fresh) at->second = nameAt(b, e.name);
        // Kept by an earlier unload: its module's name, the address may hold another's now.
        unloadedNames_.try_emplace({b.contextId, e.grid, e.name}, at->second);
      }
    }
  }
  std::erase_if(names_, [&](const auto &name) { return name.first.first == b.context; });
}

void NativeScopes::zeroEvents(const ContextBuffers &b, uint64_t count) {
  if (driver_->memsetD8Async(b.events, 0, count * sizeof(instrumentation::NativeEvent), b.stream) ==
      kSuccess)
    driver_->streamSynchronize(b.stream);
}

void NativeScopes::onContextDestroying(Context context) {
  std::lock_guard lock(mu_);
  if (!driver_) return;
  applyKeptLocked();
  auto b = std::find_if(contexts_.begin(), contexts_.end(),
                        [&](const ContextBuffers &c) { return c.context == context; });
  if (b != contexts_.end()) {
    RelaxedCaptureMode relaxed(*driver_);
    ContextScope scope(*driver_, context, /*current=*/false);
    Orphaned o;
    o.contextId = b->contextId;
    o.device = b->device;
    o.cyclesPerNs = b->cyclesPerNs;
    if (scope.ok() && readEvents(*b, o.events, /*empty=*/true) && !o.events.empty()) {
      for (const instrumentation::NativeEvent &e : o.events)
        if (!o.names.count(e.name)) o.names[e.name] = nameAt(*b, e.name);
      orphaned_.push_back(std::move(o));
    }
    contexts_.erase(b);  // its memory goes with the context
  }
  // A module loaded into a context made later (even one with the same handle) is a new one.
  std::erase_if(modules_, [&](const auto &m) { return m.first.second == context; });
  std::erase_if(names_, [&](const auto &n) { return n.first.first == context; });
  generation_.fetch_add(1, std::memory_order_release);
}

}  // namespace proton::gpu
