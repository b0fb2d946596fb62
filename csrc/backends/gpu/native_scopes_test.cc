// NativeScopes through a driver with no GPU (fake_driver.h): a module's first
// launch points its global at the context's control block, and kernels "run" by appending
// events there as proton/instrument.cuh does; drains read them back and file them by launch.
#include "backends/gpu/native_scopes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>

#include "backends/gpu/fake_driver.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

using instrumentation::NativeEvent;

constexpr size_t kEventBytes = NativeScopes::kEventsPerContext * sizeof(NativeEvent);
// Past the context's buffers (its first allocations): the module's global and a scope name.
constexpr DevicePtr kGlobal = 0x100000 + kEventBytes + 0x1000;
constexpr DevicePtr kName = kGlobal + 0x100;
const auto kModule = reinterpret_cast<Module>(0x4d0d);
const auto kFunction = reinterpret_cast<Function>(0xf00);
constexpr uint32_t kContextId = 1;  // the vendor's id of fake::kOther

DriverResult moduleOf(Module *module, Function) {
  *module = kModule;
  return kSuccess;
}
DriverResult global(DevicePtr *address, size_t *bytes, Module module, const char *name) {
  if (module != kModule || std::strcmp(name, "proton_instrument_control") != 0)
    return fake::kNotFound;
  *address = kGlobal;
  *bytes = sizeof(DevicePtr);
  return kSuccess;
}

template <typename T>
T &at(DevicePtr address) {
  return *reinterpret_cast<T *>(fake::ringMemory.data() + (address - 0x100000));
}

// proton::device::Control, where the module's global points.
struct Control {
  DevicePtr events;
  uint64_t capacity;
  uint64_t head;
};

struct Native {
  Native() {
    fake::reset(fake::kOther);
    fake::ringMemory.assign(kEventBytes + 0x2000, 0);
    std::strcpy(reinterpret_cast<char *>(&at<char>(kName)), "body");
    driver = fake::driverWithReduction();
    driver.funcGetModule = moduleOf;
    driver.moduleGetGlobal = global;
    scopes.start(&driver);
  }
  ~Native() { scopes.stop(); }
  // The launch callback of grid `grid`'s launch (correlation = grid).
  void launch(uint64_t grid) {
    scopes.onLaunch(kFunction, fake::kOther, kContextId, "scaled", grid, &entry, 1);
  }
  // A warp's claim of the next event: written later (write), as a kernel may still do when a
  // drain reads.
  uint64_t claim() { return at<Control>(at<DevicePtr>(kGlobal)).head++; }
  // What a warp of grid `grid` writes into event i on entering (or leaving) its scope.
  void write(uint64_t i, uint64_t grid, bool exit, uint64_t clock) {
    NativeEvent e{grid, kName, clock, 1000 + clock, 0, exit ? 1u : 0u, 0};
    at<NativeEvent>(at<Control>(at<DevicePtr>(kGlobal)).events + i * sizeof(NativeEvent)) = e;
  }
  void append(uint64_t grid, bool exit, uint64_t clock) { write(claim(), grid, exit, clock); }
  // Grid `grid`'s kernel record; with no end where a flush forced it out while it ran.
  void finished(uint64_t grid, bool ended = true) {
    KernelRecord record;
    record.correlation = grid;
    record.gridId = static_cast<int64_t>(grid);
    record.context = kContextId;
    record.startNs = 1000;
    record.endNs = ended ? 2000 : 0;
    scopes.noteKernel(record, &entry, 1, StringId{});
  }
  // A flush that synchronised the context (or, as when a capture was under way, did not).
  void flush(
      const std::function<void()> &duringIt = [] {}, bool synced = true) {
    scopes.beforeSync();
    duringIt();
    std::vector<Context> contexts;
    if (synced) contexts.push_back(fake::kOther);
    scopes.drain(contexts);
  }
  Control &control() { return at<Control>(at<DevicePtr>(kGlobal)); }
  // A launch of grid `grid` whose warp enters its scope at `from` and leaves at `to`, finished.
  void ran(uint64_t grid, uint64_t from, uint64_t to) {
    launch(grid);
    append(grid, false, from);
    append(grid, true, to);
    finished(grid);
  }
  // Events counted as unattributed since the fixture was made.
  uint64_t unattributed() const { return unattributedCounter.value() - unattributedBefore; }
  double bodyMetric(const char *name) {
    NodeId kernel = session.child(PhaseId{0}, kRootNode, S("scaled"));
    return metric(session, session.child(PhaseId{0}, kernel, S("body")), name);
  }
  double bodyCount() { return bodyMetric("count"); }

  Driver driver;
  NativeScopes scopes;
  Session session{SessionId{90}, instrumentation()};
  LaunchEntry entry{&session, kRootNode, PhaseId{0}, false};
  Counter &unattributedCounter =
      Stats::global().counter("instrumentation_native_events_unattributed");
  const uint64_t unattributedBefore = unattributedCounter.value();
};

// A module's first launch sets it up with copies on Proton's own stream, in relaxed capture
// mode (it may be a launch being captured into a CUDA graph), never on the legacy stream.
TEST(NativeScopes, AModulesFirstLaunchSetsItUpOffTheLegacyStreamInRelaxedMode) {
  Native n;
  n.launch(11);
  EXPECT_NE(at<DevicePtr>(kGlobal), 0u);
  EXPECT_EQ(at<Control>(at<DevicePtr>(kGlobal)).capacity, NativeScopes::kEventsPerContext);
  EXPECT_EQ(fake::legacyCopies, 0u);
  EXPECT_EQ(fake::allocationsInGlobalMode, 0u);
  EXPECT_EQ(fake::ownStreams, 1u);
  for (CaptureMode mode : fake::modesAtSync) EXPECT_EQ(mode, CaptureMode::kRelaxed);
  n.append(11, false, 100);
  n.append(11, true, 130);
  n.finished(11);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(fake::legacyCopies, 0u);
}

// A kernel launched during a flush (by another thread) may still be appending when the drain
// reads: the drain leaves the buffer as it is and the next one reads on from there, with the
// events of that launch kept until its record comes. Emptying the buffer then lost, unsaid,
// whatever the kernel appended between the drain's read and the emptying.
TEST(NativeScopes, AKernelLaunchedDuringAFlushKeepsItsEventsForTheNextDrain) {
  Native n;
  n.ran(11, 100, 130);
  n.flush([&] {
    n.launch(12);  // during the flush: running when the drain reads
    n.append(12, false, 200);
  });
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.control().head, 3u);  // not emptied under the running kernel
  n.append(12, true, 260);
  n.finished(12);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 2.0);
  EXPECT_EQ(n.control().head, 0u);  // no launch during this flush: emptied
  EXPECT_EQ(n.unattributed(), 0u);
  n.ran(13, 300, 310);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 3.0);
}

// A CUDA graph launched during a flush may run kernels of an instrumented module: the
// buffer is kept for the next drain as for any launch. (Before, only cuLaunchKernel[Ex]
// counted: the drain emptied the buffer under the replay, whose events were then counted
// unattributed or never read.)
// CUPTI's record thread notes kernel records holding CUPTI's own locks, which a drain's driver
// calls may wait for: a record noted while a drain holds the lock does not wait for it; the
// next drain takes it first and files the launch's events.
TEST(NativeScopes, AKernelRecordNotedDuringADrainDoesNotWaitForItAndTheNextDrainFilesIt) {
  Native n;
  n.launch(21);
  n.append(21, false, 100);
  n.append(21, true, 140);
  bool notedWithoutWaiting = false;
  std::future<void> noted;  // outlives the drain: a call still waiting then ends after it
  fake::onStreamSync = [&] {
    if (noted.valid()) return;
    // The drain's read-back, its lock held (the 10 s bound only keeps a regression from
    // hanging the test: before, the call waited for the lock).
    noted = std::async(std::launch::async, [&] { n.finished(21); });
    notedWithoutWaiting = noted.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  };
  n.flush([] {}, /*synced=*/false);  // grid 21 had no record when it read: its events stay
  fake::onStreamSync = nullptr;
  noted.wait();
  EXPECT_TRUE(notedWithoutWaiting);
  EXPECT_EQ(n.bodyCount(), -1.0);  // nothing filed yet (metric's "no value")
  n.flush();
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.unattributed(), 0u);
}

TEST(NativeScopes, AGraphLaunchedDuringAFlushKeepsTheBufferForTheNextDrain) {
  Native n;
  n.ran(11, 100, 130);
  n.flush([&] {
    n.scopes.onGraphLaunch();
    n.append(12, false, 200);  // the replay's kernel, grid 12: its record has not come
  });
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.control().head, 3u);  // not emptied under the replay
  n.append(12, true, 260);
  KernelRecord replay;  // the replayed kernel's record: found by its name, filed where it went
  replay.correlation = 77;
  replay.gridId = 12;
  replay.context = kContextId;
  replay.graphNodeId = 5;
  replay.name = "scaled";
  replay.startNs = 1000;
  replay.endNs = 2000;
  n.scopes.noteKernel(replay, &n.entry, 1, StringId{});
  n.flush();
  EXPECT_EQ(n.control().head, 0u);
  EXPECT_EQ(n.bodyCount(), 2.0);
  EXPECT_EQ(n.unattributed(), 0u);
}

// Claims past the capacity are counted once each, and a full buffer is not emptied while a
// kernel may still append to it (claims made between the drain's read and its reset were lost
// uncounted, and the running launch's events split).
TEST(NativeScopes, ClaimsPastTheCapacityAreCountedOnceAndAFullBufferWaitsForQuiet) {
  Native n;
  Counter &lost = Stats::global().counter("instrumentation_native_events_lost");
  const uint64_t before = lost.value();
  n.ran(11, 100, 130);
  n.control().head = NativeScopes::kEventsPerContext + 5;  // 5 claims found it full
  n.flush([&] { n.launch(12); });                          // running during the flush
  EXPECT_EQ(lost.value(), before + 5);
  EXPECT_EQ(n.bodyCount(), 1.0);  // the finished launch's scope is filed
  EXPECT_EQ(n.control().head, NativeScopes::kEventsPerContext + 5);  // kept
  n.control().head += 2;  // two more claims while it is full
  n.finished(12);
  n.flush();  // quiet: counted and emptied
  EXPECT_EQ(lost.value(), before + 7);
  EXPECT_EQ(n.control().head, 0u);
  EXPECT_EQ(n.bodyCount(), 1.0);
}

// A drain during which a kernel still runs finds events claimed and not written yet (or
// half-written): only events of finished launches are filed, and the rest is read again, whole,
// by the next drain, around those filed already. (Before, what the drain read was kept and
// filed later as it was: the unwritten enter was unattributed, the scope lost.)
TEST(NativeScopes, AnEventClaimedButNotWrittenWhenADrainReadsIsReadAgainWhole) {
  Native n;
  n.launch(31);
  n.append(31, false, 100);
  uint64_t unwritten = 0;
  n.flush([&] {
    n.launch(32);  // during the flush: running when the drain reads
    unwritten = n.claim();
    n.append(31, true, 130);  // the first launch's last event, after the claim
    n.finished(31);
  });
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 30.0);
  n.flush([&] { n.launch(33); });  // the claim still unwritten: left again, past it kept as filed
  EXPECT_EQ(n.bodyMetric("cycles"), 30.0);
  n.write(unwritten, 32, false, 200);
  n.append(32, true, 260);
  n.finished(32);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 2.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 30.0 + 60.0);  // the first launch's exit not filed twice
  EXPECT_EQ(n.unattributed(), 0u);
  EXPECT_EQ(at<Control>(at<DevicePtr>(kGlobal)).head, 0u);
}

// A flush that could not synchronise the context (a capture was under way there) forces out
// the record of a kernel still running, with no end: its events are not filed, and the buffer
// is not emptied under it, until a flush that synchronised the context. (Before, that drain
// emptied the buffer: the exit the kernel wrote after it was never read, and the place it had
// claimed was read unwritten, as no launch's.)
TEST(NativeScopes, AKernelOfAContextTheFlushDidNotSynchroniseIsNotReadUnderIt) {
  Native n;
  n.launch(41);
  n.append(41, false, 100);
  const uint64_t exitAt = n.claim();
  n.finished(41, /*ended=*/false);
  n.flush([] {}, /*synced=*/false);
  EXPECT_EQ(n.control().head, 2u);
  n.write(exitAt, 41, true, 150);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 50.0);
  EXPECT_EQ(n.control().head, 0u);
  EXPECT_EQ(n.unattributed(), 0u);
}

// An emptied buffer is zeroed: a place claimed and not yet written when a drain reads it holds
// no earlier launch's event, which that launch (its record come late) would take as its own.
TEST(NativeScopes, APlaceClaimedAndNotWrittenHoldsNoEarlierEvent) {
  Native n;
  n.launch(51);
  n.append(51, false, 100);
  n.append(51, true, 130);
  n.flush();  // 51's record has not come: its events are unattributed, the buffer emptied
  EXPECT_EQ(n.unattributed(), 2u);
  n.finished(51);
  uint64_t claimed = 0;
  n.flush([&] {
    n.launch(52);
    claimed = n.claim();  // where 51's enter was
  });
  n.write(claimed, 52, false, 200);
  n.append(52, true, 260);
  n.finished(52);
  n.flush();
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 60.0);
  EXPECT_EQ(n.unattributed(), 2u);
}

// Events of a launch whose session ended before they were read (the flush above ran during
// the launch, and another session goes on) have nowhere to go: counted as unattributed.
// (Before, they were dropped without a count.)
TEST(NativeScopes, EventsReadAfterTheirSessionEndedAreCountedAsUnattributed) {
  Native n;
  n.ran(21, 100, 140);
  n.session.releaseData();
  n.flush();
  EXPECT_EQ(n.unattributed(), 2u);
}

// %gridid counts launches per context, so another context (of another GPU, or of the same one)
// reuses the first one's grid ids: a replay of the same kernel there as grid 31 does not take
// the events of this context's grid 31. (Before, its record replaced this context's launch and
// this context's events were filed under it.)
TEST(NativeScopes, TheSameGridIdInAnotherContextIsAnotherLaunch) {
  Native n;
  n.ran(31, 100, 150);
  NodeId elsewhere = n.session.child(PhaseId{0}, kRootNode, S("replayed_elsewhere"));
  LaunchEntry replayedUnder{&n.session, elsewhere, PhaseId{0}, false};
  KernelRecord replay;
  replay.correlation = 9031;
  replay.gridId = 31;
  replay.context = kContextId + 1;
  replay.device = 1;
  replay.graphNodeId = 7;
  replay.name = "scaled";
  replay.startNs = 3000;
  replay.endNs = 4000;
  n.scopes.noteKernel(replay, &replayedUnder, 1, StringId{});
  n.flush();
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 50.0);
  NodeId kernelThere = n.session.child(PhaseId{0}, elsewhere, S("scaled"));
  // -1: no count at all there (metric's "none").
  EXPECT_EQ(metric(n.session, n.session.child(PhaseId{0}, kernelThere, S("body")), "count"), -1);
  EXPECT_EQ(n.unattributed(), 0u);
}

// A module unloaded before a drain read its events: their names are read while the module is
// loaded (a module loaded later may hold another name at the same address), and a module
// loaded later under the same handle, whose global is not set up, is set up at its launch
// (before, its handle was taken for the old module's: it recorded nothing). Its own unload
// keeps the first module's names (on the GPU, it once renamed them after its own).
TEST(NativeScopes, AModuleUnloadedBeforeADrainKeepsItsNamesAndItsSuccessorIsSetUp) {
  Native n;
  n.launch(41);
  n.append(41, false, 100);
  n.append(41, true, 130);
  n.finished(41);
  n.scopes.onModuleUnloading(kModule);
  // Another module at the same handle and addresses: its own name there, its global null.
  std::strcpy(reinterpret_cast<char *>(&at<char>(kName)), "tail");
  const DevicePtr control = at<DevicePtr>(kGlobal);
  at<DevicePtr>(kGlobal) = 0;
  n.launch(42);
  EXPECT_EQ(at<DevicePtr>(kGlobal), control);
  n.append(42, false, 200);
  n.append(42, true, 260);
  n.finished(42);
  n.scopes.onModuleUnloading(kModule);  // the first module's events are still there: kept
  n.flush();
  NodeId kernel = n.session.child(PhaseId{0}, kRootNode, S("scaled"));
  EXPECT_EQ(n.bodyCount(), 1.0);
  EXPECT_EQ(n.bodyMetric("cycles"), 30.0);
  NodeId tail = n.session.child(PhaseId{0}, kernel, S("tail"));
  EXPECT_EQ(metric(n.session, tail, "count"), 1.0);
  EXPECT_EQ(metric(n.session, tail, "cycles"), 60.0);
  // A module Proton never set up unloads without a read.
  const size_t copies = fake::copiedBytes.size();
  n.scopes.onModuleUnloading(reinterpret_cast<Module>(0x4e0e));
  EXPECT_EQ(fake::copiedBytes.size(), copies);
}

}  // namespace
}  // namespace proton::gpu
