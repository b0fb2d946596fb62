// Drains of full rings of tree launches, through the GPU tree reduction (run by the fake
// driver as its host twin, reduceTreeSlot).
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "backends/gpu/fake_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

const auto kStreamA = reinterpret_cast<Stream>(0x7777);
const auto kStreamB = reinterpret_cast<Stream>(0x8888);

// A one-warp tree kernel with one scope of its own, "body".
instrumentation::ScopeTable summedTable() { return oneWarpTreeTable("summed", 0x7ee); }

// `buffers` recording through `driver` into a 1 MB ring (device memory for it, its graph
// arena, then the reduction's descriptors and output), with the summed kernel's table.
instrumentation::ScopeTable startSummed(IntraKernelBuffers &buffers, const Driver &driver) {
  fake::reset(fake::kOther);
  startRecording(buffers, driver, /*maxTraceEvents=*/0, /*traceCapacity=*/4);
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  fake::ringMemory.assign((size_t{1} << 20) + (size_t{1} << 17) + 4096 * (16 + kOut), 0);
  instrumentation::ScopeTable table = summedTable();
  buffers.tables().add(table);
  return table;
}

// One launch of the summed kernel filed under `entry`, once its slot was handed out.
void launchSummed(IntraKernelBuffers &buffers, const instrumentation::ScopeTable &table,
                  uint64_t ptr, uint32_t correlation, const LaunchEntry &entry) {
  buffers.bindLaunch(correlation, &entry, 1, "summed", StringId{});
  ASSERT_TRUE(fake::oneWarpTreeRan(table.hash, table.unitBytes, ptr));
  buffers.launchReturned();  // its call returned: the kernel is on its stream
}

// A launch of the summed kernel on `stream`, filed under `entry`.
void launchSummedOn(IntraKernelBuffers &buffers, const Driver &driver,
                    const instrumentation::ScopeTable &table, Stream stream, uint32_t correlation,
                    const LaunchEntry &entry) {
  uint64_t ptr = 0;
  ASSERT_EQ(
      buffers.allocate(driver, table.unitBytes, false, reinterpret_cast<uint64_t>(stream), &ptr),
      IntraKernelBuffers::Alloc::kOk);
  launchSummed(buffers, table, ptr, correlation, entry);
}

// The summed kernel's buffers recording for one tree session, through the fake driver (with
// the GPU reduction or without it); the session ends with it.
struct Summed {
  explicit Summed(int session, bool gpuReduction = true)
      : driver(gpuReduction ? fake::driverWithReduction() : fake::driver()),
        table(startSummed(buffers, driver)),
        tree{SessionId{session}, instrumentation()},
        entry{&tree, kRootNode, PhaseId{0}, false} {}
  ~Summed() { buffers.removeUser(); }
  // A trace launch of 4096 bytes on `stream`, returned from its call, whose kernel record has
  // not come yet.
  void traceLaunch(uint64_t correlation, Stream stream) {
    uint64_t ptr = 0;
    ASSERT_EQ(
        buffers.allocate(driver, 4096, /*trace=*/true, reinterpret_cast<uint64_t>(stream), &ptr),
        IntraKernelBuffers::Alloc::kOk);
    buffers.bindLaunch(correlation, &entry, 1, "summed", StringId{});
    buffers.launchReturned();
  }

  Driver driver;
  IntraKernelBuffers buffers;
  instrumentation::ScopeTable table;
  Session tree;
  LaunchEntry entry;
};

// Launches that fill the 1 MB ring several times over, each drained as the backend does when
// the ring is full (not waiting for filing), then a flush: every launch's sums are reduced on
// the GPU, read back and filed (on the filing thread), none twice, none lost.
TEST(IntraKernelBuffersDrain, FullTreeRingsAreReducedOnTheGpuAndEveryLaunchIsFiled) {
  Summed s(51);
  auto &[driver, buffers, table, tree, entry] = s;
  Counter &onHost = Stats::global().counter("instrumentation_tree_reduced_on_host");
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  uint64_t onHostBefore = onHost.value(), unrecordedBefore = unrecorded.value();
  constexpr int kLaunches = 10000;  // 256-byte slots: about 4096 to a ring
  int drains = 0;
  for (int i = 0; i < kLaunches; ++i) {
    uint64_t ptr = 0;
    auto got = buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr);
    if (got == IntraKernelBuffers::Alloc::kFull) {
      buffers.drain(driver, /*waitForFiling=*/false);
      ++drains;
      got = buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr);
    }
    ASSERT_EQ(got, IntraKernelBuffers::Alloc::kOk) << i;
    launchSummed(buffers, table, ptr, 1000 + i, entry);
  }
  buffers.drain(driver);  // a flush: waits for the filing thread
  EXPECT_EQ(drains, 2);
  EXPECT_EQ(fake::reductions, 3u);
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("summed"));
  NodeId body = tree.child(PhaseId{0}, kernel, S("body"));
  EXPECT_EQ(metric(tree, kernel, "cycles"), 100.0 * kLaunches);
  EXPECT_EQ(metric(tree, body, "cycles"), 30.0 * kLaunches);
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * kLaunches);
  EXPECT_EQ(onHost.value(), onHostBefore);
  EXPECT_EQ(unrecorded.value(), unrecordedBefore);
}

// A drain whose read-back throws (host memory ran out) counts it, and leaves the ring as any
// drain does: the next launches get slots and are filed. (Before, the exception left the
// launches' slot indices stale, and the next kernel record indexed past the slots.)
TEST(IntraKernelBuffersDrain, ADrainThatThrowsIsCountedAndTheRingGoesOn) {
  Summed s(52);
  auto &[driver, buffers, table, tree, entry] = s;
  Counter &failed = Stats::global().counter("instrumentation_drains_failed");
  const uint64_t before = failed.value();
  for (int i = 0; i < 3; ++i) {
    uint64_t ptr = 0;
    ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
              IntraKernelBuffers::Alloc::kOk);
    launchSummed(buffers, table, ptr, 2000 + i, entry);
  }
  Driver throwing = driver;
  throwing.memcpyDtoHAsync = [](void *, DevicePtr, size_t, Stream) -> DriverResult {
    throw std::bad_alloc();
  };
  buffers.drain(throwing);
  EXPECT_EQ(failed.value(), before + 1);
  for (int i = 0; i < 2; ++i) {
    uint64_t ptr = 0;
    ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
              IntraKernelBuffers::Alloc::kOk);
    launchSummed(buffers, table, ptr, 3000 + i, entry);
  }
  buffers.drain(driver);
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("summed"));
  EXPECT_EQ(metric(tree, tree.child(PhaseId{0}, kernel, S("body")), "count"), 2.0 * 2);
  EXPECT_EQ(failed.value(), before + 1);
}

// A drain copies, reduces and clears on a stream of Proton's own, in relaxed capture mode,
// with the GPU reduction or without it: nothing of it is on the legacy stream, which waits
// for blocking streams (one being captured among them), and it waits for the launches'
// stream, not the context (which a capture on another thread does not survive).
TEST(IntraKernelBuffersDrain, ADrainRunsInRelaxedCaptureModeOffTheLegacyStream) {
  for (bool gpuReduction : {true, false}) {
    Summed s(52, gpuReduction);
    auto &[driver, buffers, table, tree, entry] = s;
    for (uint32_t i = 0; i < 3; ++i)
      launchSummedOn(buffers, driver, table, kStreamA, 2000 + i, entry);
    fake::legacyCopies = fake::syncMemsets = 0;
    fake::modesAtSync.clear();
    testing::internal::CaptureStderr();  // without the reduction: said once
    buffers.drain(driver);
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(fake::legacyCopies, 0u) << gpuReduction;
    EXPECT_EQ(fake::syncMemsets, 0u) << gpuReduction;
    ASSERT_FALSE(fake::modesAtSync.empty());
    for (CaptureMode mode : fake::modesAtSync)
      EXPECT_EQ(mode, CaptureMode::kRelaxed) << gpuReduction;
    EXPECT_EQ(fake::captureMode, CaptureMode::kGlobal);  // the thread's, put back
    EXPECT_EQ(fake::contextSyncs, 0u) << gpuReduction;
    EXPECT_EQ(fake::syncedStreams, std::vector<Stream>{kStreamA}) << gpuReduction;
    NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
    EXPECT_EQ(metric(tree, body, "count"), 6.0) << gpuReduction;
  }
}

// A drain waits for each stream the ring's launches ran on, once, and not for the context,
// which a CUDA graph being captured on another thread does not survive (before, it did: a
// probe on an H200 saw 0 of 300 captures survive a thread whose launches filled a 4 MB ring).
// A stream about to begin a capture or be destroyed is marked first (an event recorded on it,
// kept for the next drain and used again after it), since it cannot be waited for later.
TEST(IntraKernelBuffersDrain, ADrainWaitsForItsLaunchesStreamsAndMarksNotTheContext) {
  Summed s(53);
  // Lambdas below name its parts through s (clang before 16 refuses capturing structured bindings).
  auto &[driver, buffers, table, tree, entry] = s;
  uint32_t launches = 0;
  auto launchOn = [&](Stream stream) {
    launchSummedOn(s.buffers, s.driver, s.table, stream, 3000 + launches++, s.entry);
  };
  launchOn(kStreamA);
  launchOn(kStreamB);
  launchOn(kStreamA);
  launchOn(nullptr);  // the legacy default stream
  buffers.drain(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamA, kStreamB, nullptr}));
  EXPECT_TRUE(fake::syncedEvents.empty());

  // B begins a capture after a launch on it: a mark is recorded on it before, and the drain
  // waits for the mark and A, not for B (capturing now).
  fake::syncedStreams.clear();
  launchOn(kStreamA);
  launchOn(kStreamB);
  buffers.onStreamRetiring(kStreamB, /*captureBegins=*/true);
  ASSERT_EQ(fake::recordedEvents.size(), 1u);
  EXPECT_EQ(fake::recordedEvents[0].second, kStreamB);
  fake::capturingStream = kStreamB;
  buffers.onStreamRetiring(kStreamB, true);  // the runtime's call, then the driver's: once
  // A stream with no launch into the ring since the last drain needs no mark.
  buffers.onStreamRetiring(reinterpret_cast<Stream>(0x9999), /*captureBegins=*/false);
  buffers.onStreamRetiring(kStreamB, /*captureBegins=*/true);
  EXPECT_EQ(fake::recordedEvents.size(), 1u);
  buffers.drain(driver);
  EXPECT_EQ(fake::syncedStreams, std::vector<Stream>{kStreamA});
  EXPECT_EQ(fake::syncedEvents, std::vector<Event>{fake::recordedEvents[0].first});

  // A destroyed after a launch on it: the same mark, used again.
  fake::capturingStream = nullptr;
  fake::syncedStreams.clear();
  launchOn(kStreamA);
  buffers.onStreamRetiring(kStreamA, /*captureBegins=*/false);
  buffers.drain(driver);
  EXPECT_TRUE(fake::syncedStreams.empty());
  ASSERT_EQ(fake::recordedEvents.size(), 2u);
  EXPECT_EQ(fake::recordedEvents[1], std::make_pair(fake::recordedEvents[0].first, kStreamA));
  EXPECT_EQ(fake::eventsMade, 1u);
  EXPECT_EQ(fake::contextSyncs, 0u);

  // Where a stream cannot be waited for, the context is, and counted: the per-thread default
  // stream (another one on the draining thread), a capture begun unseen, more streams than
  // a ring keeps.
  Counter &waits = Stats::global().counter("instrumentation_drains_waiting_for_context");
  uint64_t before = waits.value();
  launchOn(kPerThreadStream);
  buffers.drain(driver);
  EXPECT_EQ(fake::contextSyncs, 1u);
  launchOn(kStreamB);
  fake::capturingStream = kStreamB;
  buffers.drain(driver);
  EXPECT_EQ(fake::contextSyncs, 2u);
  fake::capturingStream = nullptr;
  for (size_t i = 0; i < IntraKernelBuffers::kWaitStreams; ++i)
    launchOn(reinterpret_cast<Stream>(0x10000 + 16 * i));
  buffers.drain(driver);
  EXPECT_EQ(fake::contextSyncs, 2u);  // each of them waited for
  for (size_t i = 0; i <= IntraKernelBuffers::kWaitStreams; ++i)
    launchOn(reinterpret_cast<Stream>(0x10000 + 16 * i));
  buffers.drain(driver);
  EXPECT_EQ(fake::contextSyncs, 3u);
  EXPECT_EQ(waits.value(), before + 3);
  // Every launch was filed, once.
  NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * launches);
  EXPECT_EQ(launches, 9u + 2 * IntraKernelBuffers::kWaitStreams + 1);
}

// A capture beginning on a blocking stream marks the legacy stream too: the legacy stream
// waits for blocking streams, so waiting for it would wait for the capture (and end it).
// kLegacyStream and the null stream are both the legacy stream.
TEST(IntraKernelBuffersDrain, ACaptureOnABlockingStreamMarksTheLegacyStreamToo) {
  Summed s(55);
  auto &[driver, buffers, table, tree, entry] = s;
  launchSummedOn(buffers, driver, table, nullptr, 600, entry);
  launchSummedOn(buffers, driver, table, kLegacyStream, 601, entry);
  launchSummedOn(buffers, driver, table, kStreamB, 602, entry);
  launchSummedOn(buffers, driver, table, kStreamA, 603, entry);
  buffers.onStreamRetiring(kStreamA, /*captureBegins=*/true);  // non-blocking: A alone
  ASSERT_EQ(fake::recordedEvents.size(), 1u);
  fake::blockingStream = kStreamB;
  buffers.onStreamRetiring(kStreamB, /*captureBegins=*/true);
  ASSERT_EQ(fake::recordedEvents.size(), 4u);
  EXPECT_EQ(fake::recordedEvents[1].second, kStreamB);
  EXPECT_EQ(fake::recordedEvents[2].second, nullptr);
  EXPECT_EQ(fake::recordedEvents[3].second, kLegacyStream);
  buffers.drain(driver);
  EXPECT_TRUE(fake::syncedStreams.empty());
  EXPECT_EQ(fake::syncedEvents.size(), 4u);
  EXPECT_EQ(fake::contextSyncs, 0u);
}

// Where a stream cannot be marked or waited for, the drain waits for the context (counted)
// rather than read slots whose kernels may still run: a stream already capturing when its
// retiring call comes (it joined a capture unseen), an event that cannot be recorded, a
// stream whose wait fails, streams left from a session that ended before its drain.
TEST(IntraKernelBuffersDrain, WhatCannotBeWaitedForFallsBackToTheContext) {
  Summed s(56);
  // Lambdas below name its parts through s (clang before 16 refuses capturing structured bindings).
  auto &[driver, buffers, table, tree, entry] = s;
  Counter &waits = Stats::global().counter("instrumentation_drains_waiting_for_context");
  const uint64_t before = waits.value();
  uint32_t correlation = 700;
  auto launchAndDrain = [&](auto between) {
    launchSummedOn(s.buffers, s.driver, s.table, kStreamA, correlation++, s.entry);
    between();
    s.buffers.drain(s.driver);
  };
  launchAndDrain([] {});
  EXPECT_EQ(fake::contextSyncs, 0u);
  launchAndDrain([&] {
    fake::capturingStream = kStreamA;
    s.buffers.onStreamRetiring(kStreamA, /*captureBegins=*/false);
    fake::capturingStream = nullptr;
  });
  EXPECT_TRUE(fake::recordedEvents.empty());  // nothing put into the program's graph
  EXPECT_EQ(fake::contextSyncs, 1u);
  launchAndDrain([&] {
    fake::eventRecordFails = true;
    s.buffers.onStreamRetiring(kStreamA, /*captureBegins=*/false);
    fake::eventRecordFails = false;
  });
  EXPECT_EQ(fake::contextSyncs, 2u);
  launchAndDrain([] { fake::unwaitableStream = kStreamA; });
  fake::unwaitableStream = nullptr;
  EXPECT_EQ(fake::contextSyncs, 3u);
  launchAndDrain([&] {
    s.buffers.removeUser();
    s.buffers.addUser();
  });
  EXPECT_EQ(fake::contextSyncs, 4u);
  launchAndDrain([] {});
  EXPECT_EQ(fake::contextSyncs, 4u);  // and the next drain waits for streams again
  EXPECT_EQ(waits.value(), before + 4);
  NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
  // The launch left in the ring when the last user went was counted as unrecorded then, and
  // is not filed (its sessions have ended).
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 5);
}

// A full trace ring is drained without a flush (whose context synchronisation would end a
// capture on another thread): its launches' streams are waited for, then its launches' kernel
// records (their starts place the slices), then the drain has nothing left to wait for.
TEST(IntraKernelBuffersDrain, AFullTraceRingWaitsForItsStreamsThenForItsKernelRecords) {
  Summed s(54);
  auto &[driver, buffers, table, trace, entry] = s;
  s.traceLaunch(70, kStreamA);
  s.traceLaunch(71, kStreamB);
  EXPECT_FALSE(buffers.traceStartsKnown());
  // A third launch failed: no kernel record will come for it.
  uint64_t failed = 0;
  ASSERT_EQ(
      buffers.allocate(driver, 4096, /*trace=*/true, reinterpret_cast<uint64_t>(kStreamA), &failed),
      IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(99, &entry, 1, "summed", StringId{});
  buffers.launchReturned();
  buffers.cancelLaunch(99);
  buffers.waitForRings(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamA, kStreamB}));
  buffers.noteKernel(70, 1000);
  EXPECT_FALSE(buffers.traceStartsKnown());
  buffers.noteKernel(71, 2000);
  EXPECT_TRUE(buffers.traceStartsKnown());
  testing::internal::CaptureStderr();  // the slots hold no events: nothing to say about them
  buffers.drain(driver);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(fake::syncedStreams.size(), 2u);
  EXPECT_EQ(fake::contextSyncs, 0u);
  EXPECT_TRUE(buffers.traceStartsKnown());  // none left
}

// CUPTI's record thread notes kernel starts holding CUPTI's own locks, which a drain's driver
// calls may wait for: a start noted while a drain holds the buffers' lock does not wait for
// it (a device reset hung once on an H200 so), and is set when starts are next read.
TEST(IntraKernelBuffersDrain, AKernelStartNotedDuringADrainDoesNotWaitForIt) {
  Summed s(54);
  auto &[driver, buffers, table, trace, entry] = s;
  s.traceLaunch(70, kStreamA);
  s.traceLaunch(71, kStreamB);
  bool notedWithoutWaiting = false;
  std::future<void> noted;  // outlives the drain: a call still waiting then ends after it
  fake::onStreamSync = [&] {
    if (noted.valid()) return;
    // The drain's stream wait, its lock held; the record thread's call must return. Before,
    // it waited for the lock (the 10 s bound only keeps a regression from hanging the test).
    noted = std::async(std::launch::async, [&] { buffers.noteKernel(70, 1000); });
    notedWithoutWaiting = noted.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  };
  buffers.waitForRings(driver);
  fake::onStreamSync = nullptr;
  noted.wait();
  EXPECT_TRUE(notedWithoutWaiting);
  buffers.noteKernel(71, 2000);
  EXPECT_TRUE(buffers.traceStartsKnown());  // 70's start, kept aside, was set
}

// Another thread's drain can come between a launch being handed its slot and its kernel
// reaching its stream (its launch call's return): the drain's waits do not cover that kernel.
// Its slot was read and cleared then, and its bytes handed to the next launches, whose
// records it overwrote (on an H100, one launch of 1,864 in a cross-thread GPU test lost its
// scopes). Now a drain keeps such a slot, unread and uncleared, for the next drain, and the
// next slots go around it.
TEST(IntraKernelBuffersDrain, ALaunchInItsCallWhenADrainComesIsKeptForTheNextDrain) {
  Summed s(55);
  // Lambdas below name its parts through s (clang before 16 refuses capturing structured bindings).
  auto &[driver, buffers, table, tree, entry] = s;
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  uint64_t unrecordedBefore = unrecorded.value();
  launchSummedOn(buffers, driver, table, kStreamA, 1, entry);
  // The other thread: a slot handed out; later its launch call begins (bound); later still its
  // kernel runs and the call returns.
  std::promise<uint64_t> handedOut;
  std::promise<void> launch, bound, runNow;
  std::thread other([&] {
    uint64_t ptr = 0;
    s.buffers.allocate(s.driver, s.table.unitBytes, false, reinterpret_cast<uint64_t>(kStreamB),
                       &ptr);
    handedOut.set_value(ptr);
    launch.get_future().wait();
    s.buffers.bindLaunch(2, &s.entry, 1, "summed", StringId{});
    bound.set_value();
    runNow.get_future().wait();
    fake::oneWarpTreeRan(s.table.hash, s.table.unitBytes, ptr);
    s.buffers.launchReturned();
  });
  const uint64_t slot = handedOut.get_future().get();
  ASSERT_NE(slot, 0u);
  buffers.drain(driver);                 // launch 1 filed; the other's slot not yet launched: kept
  for (uint32_t correlation : {3, 4}) {  // their slots go around the one kept
    uint64_t ptr = 0;
    ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, reinterpret_cast<uint64_t>(kStreamA),
                               &ptr),
              IntraKernelBuffers::Alloc::kOk);
    EXPECT_TRUE(ptr + table.unitBytes <= slot || slot + table.unitBytes <= ptr) << ptr;
    launchSummed(buffers, table, ptr, correlation, entry);
  }
  launch.set_value();
  bound.get_future().wait();
  fake::syncedStreams.clear();
  // Launches 3 and 4 filed; the other's is bound but its kernel has not run: read now, it
  // would be filed empty.
  buffers.drain(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamB, kStreamA}));
  // A wait alone (a full trace ring's, before its drain) keeps the streams of what is in flight.
  fake::syncedStreams.clear();
  buffers.waitForRings(driver);
  buffers.waitForRings(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamB, kStreamB}));
  runNow.set_value();
  other.join();
  buffers.drain(driver);  // the other's launch filed, with what its kernel wrote
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("summed"));
  NodeId body = tree.child(PhaseId{0}, kernel, S("body"));
  EXPECT_EQ(metric(tree, kernel, "cycles"), 100.0 * 4);
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 4);
  EXPECT_EQ(unrecorded.value(), unrecordedBefore);
  EXPECT_EQ(fake::contextSyncs, 0u);
}

// A thread that ends with a slot whose launch never came (Triton's launcher skips an empty
// grid) leaves nothing in flight: the next drain keeps nothing, and the bytes are used again.
TEST(IntraKernelBuffersDrain, ASlotOfAThreadThatEndedWithoutItsLaunchIsNotKept) {
  Summed s(56);
  // Lambdas below name its parts through s (clang before 16 refuses capturing structured bindings).
  auto &[driver, buffers, table, tree, entry] = s;
  uint64_t orphan = 0;
  std::thread([&] {
    s.buffers.allocate(s.driver, s.table.unitBytes, false, reinterpret_cast<uint64_t>(kStreamB),
                       &orphan);
  }).join();
  ASSERT_NE(orphan, 0u);
  launchSummedOn(buffers, driver, table, kStreamA, 1, entry);
  fake::syncedStreams.clear();
  buffers.drain(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamB, kStreamA}));
  uint64_t ptr = 0;
  ASSERT_EQ(
      buffers.allocate(driver, table.unitBytes, false, reinterpret_cast<uint64_t>(kStreamA), &ptr),
      IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(ptr, orphan);  // the ring starts over at its first bytes
  launchSummed(buffers, table, ptr, 2, entry);
  fake::syncedStreams.clear();
  buffers.drain(driver);
  EXPECT_EQ(fake::syncedStreams, (std::vector<Stream>{kStreamA}));
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("summed"));
  EXPECT_EQ(metric(tree, kernel, "cycles"), 100.0 * 2);
}

// A drain that has to wait for the whole context while a CUDA graph is being captured on it
// (the backend's context synchronisation declines: the capture would not survive it) reads and
// clears nothing: every slot, with its launch, waits for the next drain (counted), and that
// one, able to synchronise, files every launch once.
TEST(IntraKernelBuffersDrain, ADrainThatCannotSynchroniseItsContextIsPutOffWithEverySlot) {
  Summed s(57);
  auto &[driver, buffers, table, tree, entry] = s;
  static bool allowed;
  static size_t asked;
  allowed = false;
  asked = 0;
  buffers.setContextSync([](Context context) {
    ++asked;
    return context == fake::kOther && allowed;
  });
  Counter &putOff = Stats::global().counter("instrumentation_drains_put_off_for_captures");
  const uint64_t before = putOff.value();
  NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
  launchSummedOn(buffers, driver, table, kPerThreadStream, 800, entry);
  buffers.drain(driver);
  EXPECT_EQ(asked, 1u);
  EXPECT_EQ(putOff.value(), before + 1);
  EXPECT_EQ(metric(tree, body, "count"), -1.0);
  // The next launch is on a stream that can be waited for: the context still has to be.
  launchSummedOn(buffers, driver, table, kStreamA, 801, entry);
  buffers.drain(driver);
  EXPECT_EQ(asked, 2u);
  EXPECT_EQ(putOff.value(), before + 2);
  EXPECT_EQ(metric(tree, body, "count"), -1.0);
  allowed = true;
  buffers.drain(driver);
  EXPECT_EQ(asked, 3u);
  EXPECT_EQ(putOff.value(), before + 2);
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 2);
  EXPECT_EQ(fake::contextSyncs, 0u);  // the backend's synchronisation, not the driver's
  launchSummedOn(buffers, driver, table, kStreamA, 802, entry);
  buffers.drain(driver);
  EXPECT_EQ(asked, 3u);  // and the next drain waits for streams again
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 3);

  // Put off at the last session's last flush: its launches are lost, counted when it ends.
  allowed = false;
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  const uint64_t unrecordedBefore = unrecorded.value();
  launchSummedOn(buffers, driver, table, kPerThreadStream, 803, entry);
  buffers.drain(driver);
  EXPECT_EQ(putOff.value(), before + 3);
  buffers.removeUser();
  EXPECT_EQ(unrecorded.value(), unrecordedBefore + 1);
  buffers.addUser();
  // Read back in the next session: counted once, at the end above, not again when filed.
  tree.releaseData();
  allowed = true;
  buffers.drain(driver);
  EXPECT_EQ(unrecorded.value(), unrecordedBefore + 1);
}

// Two sessions one after the other whose last drains are both put off (the capture goes on):
// the first one's launch is counted when it ends, once, and not again when the second ends.
TEST(IntraKernelBuffersDrain, ALaunchLeftPastTwoSessionsIsCountedOnce) {
  Summed s(60);
  auto &[driver, buffers, table, tree, entry] = s;
  buffers.setContextSync([](Context) { return false; });
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  const uint64_t before = unrecorded.value();
  launchSummedOn(buffers, driver, table, kPerThreadStream, 830, entry);
  buffers.drain(driver);
  buffers.removeUser();
  EXPECT_EQ(unrecorded.value(), before + 1);
  buffers.addUser();  // the second session
  buffers.drain(driver);
  buffers.removeUser();
  EXPECT_EQ(unrecorded.value(), before + 1);
  buffers.addUser();  // (the fixture's end takes it)
}

// One of two sessions ends while its last drain is put off for a capture: its launch, read
// back in the other session's next drain, has no session to go to and is counted as
// unrecorded; the other session's launch is filed. (Before, it was dropped without a count.)
TEST(IntraKernelBuffersDrain, ALaunchReadBackAfterItsSessionEndedIsCountedAsUnrecorded) {
  Summed s(58);
  auto &[driver, buffers, table, tree, entry] = s;
  static bool allowed;
  allowed = false;
  buffers.setContextSync([](Context context) { return context == fake::kOther && allowed; });
  Session other{SessionId{59}, instrumentation()};
  LaunchEntry otherEntry{&other, kRootNode, PhaseId{0}, false};
  buffers.addUser();  // the other session's
  launchSummedOn(buffers, driver, table, kPerThreadStream, 820, entry);
  launchSummedOn(buffers, driver, table, kPerThreadStream, 821, otherEntry);
  buffers.drain(driver);  // the first session's last flush: put off
  tree.releaseData();     // it ends
  buffers.removeUser();
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  const uint64_t before = unrecorded.value();
  allowed = true;
  buffers.drain(driver);
  EXPECT_EQ(unrecorded.value(), before + 1);
  NodeId kernel = other.child(PhaseId{0}, kRootNode, S("summed"));
  EXPECT_EQ(metric(other, other.child(PhaseId{0}, kernel, S("body")), "count"), 2.0);
}

// A context being destroyed (cudaDeviceReset) takes its ring's memory with it: the ring is
// drained in the destroy callback (a launch still in its call is counted as unrecorded) and
// retired, so that the next context, here with the same handle as the drivers reuse them,
// records into a ring of its own rather than into freed memory.
TEST(IntraKernelBuffersDrain, AContextBeingDestroyedHasItsRingDrainedAndRetired) {
  Summed s(58);
  auto &[driver, buffers, table, tree, entry] = s;
  fake::ringMemory.resize(3 * fake::ringMemory.size());  // room for two more rings
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  const uint64_t before = unrecorded.value();
  NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
  uint64_t first = 0;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &first),
            IntraKernelBuffers::Alloc::kOk);
  launchSummed(buffers, table, first, 900, entry);
  launchSummedOn(buffers, driver, table, kStreamA, 901, entry);
  uint64_t inCall = 0;  // a launch whose call has not returned when the context goes
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &inCall),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(902, &entry, 1, "summed", StringId{});
  buffers.onContextDestroying(fake::kOther);
  buffers.waitForFiling();
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 2);
  EXPECT_EQ(unrecorded.value(), before + 1);
  buffers.launchReturned();
  buffers.drain(driver);  // nothing left to file twice
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 2);

  // A slot handed out before the context went, bound to its launch after: counted, not kept in
  // the retired ring where no drain would find it.
  uint64_t late = 0;
  buffers.forgetThreadsSlots();
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &late),
            IntraKernelBuffers::Alloc::kOk);
  buffers.onContextDestroying(fake::kOther);
  buffers.bindLaunch(904, &entry, 1, "summed", StringId{});
  buffers.launchReturned();
  EXPECT_EQ(unrecorded.value(), before + 2);

  const size_t ownStreams = fake::ownStreams;
  uint64_t next = 0;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &next),
            IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(fake::ownStreams, ownStreams + 1);  // a new ring, with its own stream
  EXPECT_GT(next, inCall);                      // in memory allocated since
  launchSummed(buffers, table, next, 903, entry);
  buffers.drain(driver);
  EXPECT_EQ(metric(tree, body, "count"), 2.0 * 3);
  EXPECT_EQ(unrecorded.value(), before + 2);
}

}  // namespace
}  // namespace proton::gpu
