#include "backends/gpu/intra_kernel_buffers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "backends/gpu/fake_driver.h"
#include "backends/gpu/gpu_driver.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::gpu {
namespace {

// A launch's intra-kernel data goes under the frame kernel tracing files the kernel at: the
// launch metadata's name for entries that hook="triton" named, the kernel's own otherwise.
// (Before, a named entry's data went to the launch's context itself, beside the kernel.)
TEST(IntraKernelTargets, NamedLaunchesFileUnderTheMetadataNameOthersUnderTheKernel) {
  Session hooked{SessionId{21}, instrumentation()};
  Session plain{SessionId{22}, instrumentation()};
  NodeId scope = hooked.child(PhaseId{0}, kRootNode, S("thread0"));
  LaunchEntry entries[] = {{&hooked, scope, PhaseId{0}, /*named=*/true},
                           {&plain, kRootNode, PhaseId{0}, /*named=*/false}};
  instrumentation::IntraTarget out[2];
  ASSERT_EQ(kernelTargets(entries, 2, S("hooked_kernel"), S("named_100000"), out), 2u);
  EXPECT_EQ(out[0].session, &hooked);
  EXPECT_EQ(out[0].kernelNode, hooked.child(PhaseId{0}, scope, S("named_100000")));
  EXPECT_NE(out[0].kernelNode, scope);
  EXPECT_EQ(out[1].session, &plain);
  EXPECT_EQ(out[1].kernelNode, plain.child(PhaseId{0}, kRootNode, S("hooked_kernel")));
  // A named entry without a name (a kernel built with proton/instrument.cuh) takes the
  // kernel's, demangled as kernel tracing shows it.
  ASSERT_EQ(kernelTargets(entries, 1, S("_Z6kernelPf"), StringId{}, out), 1u);
  EXPECT_EQ(out[0].kernelNode, hooked.child(PhaseId{0}, scope, S("kernel(float*)")));
}

// A kernel-tracing session beside an instrumentation session gets none of the intra-kernel
// data: its profile is the one it would write alone.
TEST(IntraKernelTargets, KernelTracingSessionsBesideAnInstrumentationSessionGetNothing) {
  Session tracing{SessionId{23}, SessionOptions{}};
  Session instrumenting{SessionId{24}, instrumentation()};
  LaunchEntry entries[] = {{&tracing, kRootNode, PhaseId{0}, false},
                           {&instrumenting, kRootNode, PhaseId{0}, false}};
  instrumentation::IntraTarget out[2];
  ASSERT_EQ(kernelTargets(entries, 2, S("sv"), StringId{}, out), 1u);
  EXPECT_EQ(out[0].session, &instrumenting);
}

// A session that ended (its data released) before its launch's data came is no target, and
// is told apart from a kernel-tracing session, which never was one.
TEST(IntraKernelTargets, ASessionThatEndedIsNoTargetAndIsCounted) {
  Session tracing{SessionId{25}, SessionOptions{}};
  Session ended{SessionId{26}, instrumentation()};
  Session going{SessionId{27}, instrumentation()};
  ended.releaseData();
  LaunchEntry entries[] = {{&tracing, kRootNode, PhaseId{0}, false},
                           {&ended, kRootNode, PhaseId{0}, false},
                           {&going, kRootNode, PhaseId{0}, false}};
  instrumentation::IntraTarget out[3];
  size_t gone = 7;
  ASSERT_EQ(kernelTargets(entries, 3, S("sv"), StringId{}, out, &gone), 1u);
  EXPECT_EQ(out[0].session, &going);
  EXPECT_EQ(gone, 1u);
}

// Triton asks for a launch's buffer before its launcher makes a context current, so a
// thread's first launch finds none (a thread that launched nothing before). Its buffer comes
// from the context the launch runs in, and the thread's context is left as it was. (Before,
// such launches ran unrecorded, silently: 4 threads started in a session lost one launch each.)
TEST(IntraKernelBuffersAllocate, AThreadWithNoContextGetsABufferInItsLaunchsContext) {
  Driver driver = fake::driver();
  const auto stream = uint64_t{0x7777};
  for (uint64_t s : {uint64_t{0}, stream}) {
    fake::reset(nullptr);
    IntraKernelBuffers buffers;
    buffers.addUser();
    uint64_t ptr = 0;
    ASSERT_EQ(buffers.allocate(driver, 4096, /*trace=*/true, s, &ptr),
              IntraKernelBuffers::Alloc::kOk);
    EXPECT_EQ(ptr, 0x100000u);
    // The default stream: device 0's primary context, which Triton's launcher makes current.
    EXPECT_EQ(fake::allocatedIn, s == stream ? fake::kStreamContext : fake::kPrimary);
    EXPECT_EQ(fake::current, nullptr);
    EXPECT_TRUE(fake::stack.empty());
  }
}

TEST(IntraKernelBuffersAllocate, TheCurrentContextIsUsedAsItIs) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  buffers.addUser();
  uint64_t ptr = 0;
  ASSERT_EQ(buffers.allocate(driver, 4096, true, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(fake::allocatedIn, fake::kOther);
  EXPECT_EQ(fake::current, fake::kOther);
}

// No context to be found: the launch runs without recording, and that is counted.
TEST(IntraKernelBuffersAllocate, ALaunchWithNoContextToRecordInIsCounted) {
  Driver driver = fake::driver();
  fake::reset(nullptr);
  fake::streamsHaveContexts = fake::primaryAvailable = false;
  IntraKernelBuffers buffers;
  buffers.addUser();
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  uint64_t before = unrecorded.value();
  uint64_t ptr = 1;
  EXPECT_EQ(buffers.allocate(driver, 4096, true, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOff);
  EXPECT_EQ(ptr, 0u);
  EXPECT_EQ(unrecorded.value(), before + 1);
  EXPECT_EQ(fake::allocatedIn, nullptr);
}

// A launch whose buffer exceeds the ring runs unrecorded: counted, and said once per kernel,
// with its name, at its launch (before, only the stat told, with no kernel named).
TEST(IntraKernelBuffersAllocate, ALaunchTooLargeForTheRingIsNamedOnce) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, 0, 256);
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  uint64_t before = unrecorded.value();
  std::string said;
  for (int launch = 0; launch < 2; ++launch) {
    uint64_t ptr = 1;
    testing::internal::CaptureStderr();
    EXPECT_EQ(buffers.allocate(driver, uint64_t{4} << 20, true, 0x7777, &ptr),
              IntraKernelBuffers::Alloc::kOff);
    buffers.bindLaunch(100 + launch, nullptr, 0, "_Z3bigPf", StringId{});
    said += testing::internal::GetCapturedStderr();
    EXPECT_EQ(ptr, 0u);
  }
  EXPECT_EQ(unrecorded.value(), before + 2);
  EXPECT_NE(said.find("kernel big(float*): a launch needs 4.0 MB"), std::string::npos) << said;
  EXPECT_NE(said.find("than the 1.0 MB"), std::string::npos) << said;
  EXPECT_EQ(said.find("[PROTON]"), said.rfind("[PROTON]")) << said;  // once
}

// A ring that cannot be allocated (the GPU's memory is full): each launch runs unrecorded and
// counted, the next one tries again, and the message is said once, not at every launch.
TEST(IntraKernelBuffersAllocate, ARingThatCannotBeAllocatedIsSaidOnceAndTriedAgain) {
  Driver driver = fake::driver();
  const auto full = reinterpret_cast<Context>(0x5200);  // no ring for it yet
  fake::reset(full);
  fake::ringMemory.assign(uint64_t{3} << 20, 0);
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  startRecording(buffers, driver);
  Counter &unrecorded = Stats::global().counter("instrumentation_launches_unrecorded");
  uint64_t before = unrecorded.value();
  fake::outOfMemory = true;
  testing::internal::CaptureStderr();
  uint64_t ptr = 0;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(buffers.allocate(driver, 64, false, 0, &ptr), IntraKernelBuffers::Alloc::kOff);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(unrecorded.value(), before + 3);
  size_t first = said.find("could not allocate 1 MB of GPU memory");
  ASSERT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find("could not allocate", first + 1), std::string::npos) << said;
  EXPECT_NE(said.find("PROTON_INSTRUMENTATION_RING_MB"), std::string::npos) << said;
  fake::outOfMemory = false;
  testing::internal::CaptureStderr();
  EXPECT_EQ(buffers.allocate(driver, 64, false, 0, &ptr), IntraKernelBuffers::Alloc::kOk);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(fake::allocatedIn, full);
  buffers.drain(driver);
  buffers.removeUser();
}

// A ring that cannot be zeroed is freed and tried again at the next launch, with the stream
// made for it the first time (before, each try made one more, never destroyed).
TEST(IntraKernelBuffersAllocate, ARingThatCannotBeZeroedIsTriedAgainWithItsOneStream) {
  Driver driver = fake::driver();
  const auto unzeroable = reinterpret_cast<Context>(0x5300);  // no ring for it yet
  fake::reset(unzeroable);
  fake::ringMemory.assign(uint64_t{3} << 20, 0);
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  startRecording(buffers, driver);
  fake::memsetFails = true;
  uint64_t ptr = 0;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(buffers.allocate(driver, 64, false, 0, &ptr), IntraKernelBuffers::Alloc::kOff);
  EXPECT_EQ(fake::ownStreams, 1u);
  fake::memsetFails = false;
  EXPECT_EQ(buffers.allocate(driver, 64, false, 0, &ptr), IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(fake::ownStreams, 1u);
  testing::internal::CaptureStderr();  // the GPU reduction cannot be loaded here: said once
  buffers.drain(driver);
  testing::internal::GetCapturedStderr();
  buffers.removeUser();
}

// A GPU's first eager instrumented launch sets up its ring and loads the GPU tree reduction (its
// module and two allocations) while another thread may be capturing a CUDA graph in global
// mode: all of it in relaxed capture mode, as a global-mode allocation then is refused.
TEST(IntraKernelBuffersAllocate, AGpusFirstLaunchSetsUpItsRingAndReductionInRelaxedCaptureMode) {
  Driver driver = fake::driverWithReduction();
  fake::reset(reinterpret_cast<Context>(0x5100));
  fake::ringMemory.assign(uint64_t{3} << 20, 0);
  IntraKernelBuffers buffers;
  startRecording(buffers, driver);
  uint64_t ptr = 0;
  ASSERT_EQ(buffers.allocate(driver, 64, false, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOk);
  EXPECT_GE(fake::allocated, (size_t{1} << 20) + (size_t{1} << 17));  // ring, arena, reduction
  EXPECT_EQ(fake::allocationsInGlobalMode, 0u);
  EXPECT_EQ(fake::captureMode, CaptureMode::kGlobal);  // the thread's mode, put back
  buffers.removeUser();
}

// A GPU's first instrumented launch may be one being captured into a CUDA graph, with no
// eager launch before it. Its ring and arena are allocated then, in relaxed capture mode, and
// zeroed on a stream of Proton's own, not the legacy one (which would wait for the stream being
// captured, and break the capture). Before, such launches ran unrecorded (counted).
TEST(IntraKernelBuffersAllocate, AGpusFirstLaunchBeingCapturedGetsTheRingAndASlotInItsArena) {
  Driver driver = fake::driver();
  const auto fresh = reinterpret_cast<Context>(0x5000);  // no ring for it yet
  fake::reset(fresh);
  fake::ringMemory.assign(uint64_t{3} << 20, 0xAB);  // what the memory held before
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  startRecording(buffers, driver);
  fake::capturing = true;
  uint64_t ptr = 0;
  ASSERT_EQ(buffers.allocate(driver, 64, false, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOk);
  EXPECT_TRUE(buffers.pendingCapture());
  EXPECT_EQ(fake::allocatedIn, fresh);
  EXPECT_EQ(fake::allocationsInGlobalMode, 0u);
  EXPECT_EQ(fake::captureMode, CaptureMode::kGlobal);  // the thread's mode, put back
  EXPECT_EQ(fake::syncMemsets, 0u);
  EXPECT_EQ(fake::ownStreams, 1u);  // the ring's, kept for its drains
  // The slot is the arena's first, right past the 1 MB ring; ring and arena (128 KB) zeroed.
  EXPECT_EQ(ptr, uint64_t{0x100000} + (uint64_t{1} << 20));
  size_t both = (size_t{1} << 20) + (size_t{1} << 17);
  EXPECT_TRUE(std::all_of(fake::ringMemory.begin(), fake::ringMemory.begin() + both,
                          [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(fake::ringMemory[both], 0xAB);
  // A trace launch captured on another GPU before any eager one there: no ring is made for it
  // (its replays could not be placed on the kernels' clock), and it is counted.
  const auto traceOnly = reinterpret_cast<Context>(0x5100);
  fake::current = traceOnly;
  uint64_t before = Stats::global().counter("instrumentation_graph_launches_unrecorded").value();
  EXPECT_EQ(buffers.allocate(driver, 64, true, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOff);
  EXPECT_EQ(Stats::global().counter("instrumentation_graph_launches_unrecorded").value(),
            before + 1);
  EXPECT_EQ(fake::allocatedIn, fresh);  // nothing allocated for it
  fake::capturing = false;
  buffers.removeUser();
}

// n launches of one warp that returned with no event (one slice each: its kernel scope) into
// fresh buffers with a trace cap of `cap` slices; their trace session is `trace`.
constexpr uint32_t kOneWarpUnitBytes = instrumentation::kTraceUnitHeaderBytes + 8 * 4;
constexpr uint32_t kOneWarpHash = 0x5107;
// The scope table of a one-warp trace kernel with no scopes of its own.
void addOneWarpTraceTable(IntraKernelBuffers &buffers) {
  instrumentation::ScopeTable table;
  table.kernel = "one_warp";
  table.hash = kOneWarpHash;
  table.trace = true;
  table.paths = {""};
  table.numWarps = table.unitWarps = table.unitsPerCta = 1;
  table.capacity = 4;
  table.unitBytes = kOneWarpUnitBytes;
  buffers.tables().add(table);
}

// The one-warp kernel's unit at device address `at` ran and returned: its kernel scope, one
// slice.
void oneWarpRan(uint64_t at) {
  uint8_t *unit = fake::ringMemory.data() + (at - 0x100000);
  uint64_t gt0 = 1000, gt1 = 2000, c0 = 10, returned = 1u << 31;
  uint32_t hash = kOneWarpHash;
  std::memcpy(unit + 8, &gt0, 8);
  std::memcpy(unit + 16, &gt1, 8);
  std::memcpy(unit + 24, &hash, 4);
  std::memcpy(unit + 32, &returned, 4);
  std::memcpy(unit + 40, &c0, 8);
}

// One launch of the one-warp kernel on `stream`, with correlation id `correlation`: its slot
// handed out, bound, written and its call returned.
void launchOneWarp(IntraKernelBuffers &buffers, const Driver &driver, LaunchEntry &entry,
                   uint64_t correlation, uint64_t stream) {
  uint64_t ptr = 0;
  ASSERT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, stream, &ptr),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(correlation, &entry, 1, "_Z8one_warpPf", StringId{});
  oneWarpRan(ptr);
  buffers.launchReturned();
}

void launchOneWarpTraces(IntraKernelBuffers &buffers, const Driver &driver, Session &trace, int n,
                         uint64_t cap) {
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, cap, /*traceCapacity=*/4);
  addOneWarpTraceTable(buffers);
  LaunchEntry entry{&trace, kRootNode, PhaseId{0}, false};
  fake::ringMemory.assign(uint64_t{1} << 20, 0);
  fake::copiedBytes.clear();
  for (int launch = 0; launch < n; ++launch)
    launchOneWarp(buffers, driver, entry, 300 + launch, 0x7777);
}

size_t slicesOf(Session &trace) {
  size_t slices = 0;
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) { slices = p.events().size(); });
  return slices;
}

SessionOptions traceInstrumentation() {
  SessionOptions options = instrumentation();
  options.data = DataKind::kTrace;
  return options;
}

// A drain reads back only the trace slots the trace can still keep (a ring of launches
// recorded before the trace reached its cap was copied back whole, 256 MB for the
// attention-like benchmark, to be thrown away), and files them on a thread of its own.
TEST(IntraKernelBuffersDrain, TraceSlotsPastTheCapAreNotReadBack) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  Session trace{SessionId{25}, traceInstrumentation()};
  launchOneWarpTraces(buffers, driver, trace, 12, /*cap=*/1);
  Counter &pastCap = Stats::global().counter("instrumentation_launches_past_trace_cap");
  uint64_t before = pastCap.value();
  // A full ring's drain, on the launching thread: it returns before the slices are filed.
  buffers.drain(driver, /*waitForFiling=*/false);
  // Slots are read back and counted 8 at a time: the first fills the cap of one slice, the
  // other 7 of its batch were read back with it; the last 4 are not. All 11 are counted.
  // A slot (256 bytes: 3 units' room) is read back as its units' headers, then as many event
  // places as a unit wrote: none here (before, the ring's 3072 bytes were copied in one go).
  EXPECT_EQ(fake::copiedBytes, std::vector<size_t>(16, 3 * 48));
  EXPECT_EQ(pastCap.value(), before + 11);
  // The cap is known at the drain, before the filing thread made a slice: the next launch
  // runs without recording.
  uint64_t ptr = 1;
  EXPECT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, 0x7777, &ptr),
            IntraKernelBuffers::Alloc::kOff);
  EXPECT_EQ(pastCap.value(), before + 12);
  buffers.waitForFiling();
  EXPECT_EQ(slicesOf(trace), 1u);
  buffers.removeUser();
}

// Below the cap, every launch of every batch is filed, once, and a flush's drain returns
// only when they are.
TEST(IntraKernelBuffersDrain, EveryTraceSlotBelowTheCapIsFiledOnce) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  Session trace{SessionId{26}, traceInstrumentation()};
  launchOneWarpTraces(buffers, driver, trace, 19, /*cap=*/100);
  Counter &pastCap = Stats::global().counter("instrumentation_launches_past_trace_cap");
  uint64_t before = pastCap.value();
  buffers.drain(driver);
  EXPECT_EQ(slicesOf(trace), 19u);
  EXPECT_EQ(fake::copiedBytes.size(), 2 * 19u);
  EXPECT_EQ(pastCap.value(), before);
  buffers.removeUser();
}

// An empty grid: Triton's launcher asks for 0 bytes (grid x bytes per CTA) and skips the
// launch. It gets no slot. Before, its slot of no bytes stayed in flight while its thread
// idled: another thread's slot at the same offset was taken for it (kept, yet cleared), each
// launch's data was lost there and the last one's filed once per launch, with no count.
TEST(IntraKernelBuffersAllocate, AnEmptyGridGetsNoSlotAndHidesNoOtherThreadsLaunch) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  Session trace{SessionId{27}, traceInstrumentation()};
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, 100, /*traceCapacity=*/4);
  addOneWarpTraceTable(buffers);
  fake::ringMemory.assign(uint64_t{1} << 20, 0);
  LaunchEntry entry{&trace, kRootNode, PhaseId{0}, false};
  std::promise<void> allocated, finish;
  std::thread idle([&] {
    uint64_t ptr = 1;
    EXPECT_EQ(buffers.allocate(driver, 0, true, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOff);
    EXPECT_EQ(ptr, 0u);
    allocated.set_value();
    finish.get_future().wait();  // the thread idles, its launch skipped
  });
  allocated.get_future().wait();
  for (int launch = 0; launch < 3; ++launch) {
    launchOneWarp(buffers, driver, entry, 700 + launch, 0x8888);
    buffers.noteKernel(700 + launch, 5000 + 1000 * launch);
    buffers.drain(driver);
    EXPECT_EQ(slicesOf(trace), launch + 1u);
  }
  finish.set_value();
  idle.join();
  buffers.drain(driver);
  EXPECT_EQ(slicesOf(trace), 3u);
  buffers.removeUser();
}

}  // namespace
}  // namespace proton::gpu

namespace proton::gpu {
namespace {

// `buffers` recording through `driver` into a 1 MB ring and its graph arena, with the table of
// the one-warp tree kernel "graphed" (scopes "" and "body").
instrumentation::ScopeTable startGraphed(IntraKernelBuffers &buffers, const Driver &driver) {
  fake::reset(fake::kOther);
  startRecording(buffers, driver, /*maxTraceEvents=*/0, /*traceCapacity=*/4);
  fake::ringMemory.assign((uint64_t{1} << 20) + (uint64_t{1} << 17), 0);
  instrumentation::ScopeTable table = oneWarpTreeTable("graphed", 0x6a4);
  buffers.tables().add(table);
  return table;
}

// A tree launch captured into a CUDA graph gets a slot of its own in the graph arena; each
// launch of the executable graph copies it into a ring slot filed like a launch of its own,
// under the replay's context/<captured_at>/<the capture's context>/<kernel> (where kernel
// tracing files the replay's kernel), and clears it for the next replay. (Before, every
// launch captured into a graph ran unrecorded.)
TEST(IntraKernelBuffersGraphs, EveryReplayIsFiledUnderItsReplayAndCaptureContexts) {
  Driver driver = fake::driver();
  IntraKernelBuffers buffers;
  const instrumentation::ScopeTable table = startGraphed(buffers, driver);
  Session tree{SessionId{31}, instrumentation()};
  Session tracing{SessionId{32}, SessionOptions{}};  // kernel tracing beside it: gets nothing
  testing::internal::CaptureStderr();  // the GPU reduction cannot be loaded here: said once
  uint64_t ptr = 0;
  // A launch before the capture makes the ring (and its arena): nothing is allocated while a
  // stream captures.
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
            IntraKernelBuffers::Alloc::kOk);
  LaunchEntry eager{&tree, kRootNode, PhaseId{0}, false};
  buffers.bindLaunch(40, &eager, 1, "graphed", StringId{});
  buffers.launchReturned();
  fake::capturing = true;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
            IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(ptr, 0x100000u + (uint64_t{1} << 20));  // in the arena past the ring
  ASSERT_TRUE(buffers.pendingCapture());
  CaptureContext captured;
  captured.names = {S("captured_in")};
  buffers.bindCaptured(captured, "graphed");
  EXPECT_FALSE(buffers.pendingCapture());
  // A second launch of the kernel in the same capture: its slot follows the first one.
  uint64_t second = 0;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &second),
            IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(second, ptr + 256);
  buffers.bindCaptured(captured, "graphed");
  fake::capturing = false;
  const auto exec = reinterpret_cast<GraphExec>(0x7000);
  buffers.onGraphExecCreated(exec, fake::kGraph);

  // A replay of one warp adds into the arena slot: kernel 100 cycles, "body" 30 in 2 runs.
  const auto replayStream = reinterpret_cast<Stream>(0x7878);
  auto replay = [&](NodeId under) {
    for (uint64_t at : {ptr, second})
      ASSERT_TRUE(fake::oneWarpTreeRan(table.hash, table.unitBytes, at));
    LaunchEntry entries[] = {{&tree, under, PhaseId{0}, false},
                             {&tracing, kRootNode, PhaseId{0}, false}};
    size_t copies = fake::asyncCopies;
    buffers.onGraphLaunched(exec, replayStream, entries, 2);
    // One copy for the two slots (when anyone records), and both cleared for the next replay.
    EXPECT_LE(fake::asyncCopies - copies, 1u);
    EXPECT_EQ(fake::ringMemory[ptr - 0x100000], 0);
    EXPECT_EQ(fake::ringMemory[second - 0x100000], 0);
  };
  NodeId stepA = tree.child(PhaseId{0}, kRootNode, S("step_a"));
  NodeId stepB = tree.child(PhaseId{0}, kRootNode, S("step_b"));
  replay(stepA);
  replay(stepA);
  replay(stepB);
  buffers.drain(driver);
  // The drain waited for the eager launch's stream and the replays' (their copies into the
  // ring), not for the context.
  EXPECT_EQ(fake::syncedStreams,
            (std::vector<Stream>{reinterpret_cast<Stream>(0x7777), replayStream}));
  EXPECT_EQ(fake::contextSyncs, 0u);
  auto kernelUnder = [&](NodeId replayContext) {
    NodeId at = tree.child(PhaseId{0}, replayContext, S("<captured_at>"));
    return tree.child(PhaseId{0}, tree.child(PhaseId{0}, at, S("captured_in")), S("graphed"));
  };
  EXPECT_EQ(fake::asyncCopies, 3u);
  // Two kernel launches per replay: 2 x 2 replays under step_a, 2 x 1 under step_b.
  for (auto [context, launches] : {std::pair{stepA, 4}, std::pair{stepB, 2}}) {
    NodeId kernel = kernelUnder(context);
    NodeId body = tree.child(PhaseId{0}, kernel, S("body"));
    EXPECT_EQ(metric(tree, kernel, "cycles"), 100 * launches);
    EXPECT_EQ(metric(tree, kernel, "normalized_cycles"), 100 * launches);
    EXPECT_EQ(metric(tree, body, "count"), 2 * launches);
  }
  // The kernel-tracing session beside it made no node for it.
  tracing.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(p.tree.size(), 1u);  // its root alone
  });
  // With no instrumentation session left, a replay only clears its slot (checked in replay):
  // nothing is copied for it.
  buffers.removeUser();
  replay(stepA);
  buffers.addUser();
  buffers.drain(driver);
  EXPECT_EQ(metric(tree, tree.child(PhaseId{0}, kernelUnder(stepA), S("body")), "count"), 8);
  buffers.removeUser();
  testing::internal::GetCapturedStderr();
}

// cuGraphExecUpdate gives an executable graph the nodes' parameters of another graph: its
// kernels record into that graph's slots, which its replays now copy out (before, they kept
// copying the slots of the graph it was made from, zeros, and the other graph's slots filled
// up unread).
TEST(IntraKernelBuffersGraphs, AnUpdatedExecutableCopiesOutTheSlotsOfItsNewGraph) {
  Driver driver = fake::driver();
  IntraKernelBuffers buffers;
  const instrumentation::ScopeTable table = startGraphed(buffers, driver);
  Session tree{SessionId{36}, instrumentation()};
  LaunchEntry entry{&tree, kRootNode, PhaseId{0}, false};
  testing::internal::CaptureStderr();  // the GPU reduction cannot be loaded here: said once
  uint64_t eager = 0, inG = 0, inH = 0;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &eager),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(41, &entry, 1, "graphed", StringId{});
  buffers.launchReturned();
  fake::capturing = true;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &inG),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindCaptured(CaptureContext{}, "graphed");
  const auto graphH = reinterpret_cast<Graph>(0x6100);
  fake::captureGraph = graphH;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &inH),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindCaptured(CaptureContext{}, "graphed");
  fake::capturing = false;
  const auto exec = reinterpret_cast<GraphExec>(0x7300);
  buffers.onGraphExecCreated(exec, fake::kGraph);
  EXPECT_EQ(buffers.replayKey(exec), inG);
  buffers.onGraphExecUpdated(exec, graphH);
  EXPECT_EQ(buffers.replayKey(exec), inH);
  ASSERT_TRUE(fake::oneWarpTreeRan(table.hash, table.unitBytes, inH));  // the replay's kernel
  buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7878), &entry, 1);
  EXPECT_EQ(fake::ringMemory[inH - 0x100000], 0);  // copied out and cleared
  buffers.drain(driver);
  NodeId at = tree.child(PhaseId{0}, kRootNode, S("<captured_at>"));
  NodeId kernel = tree.child(PhaseId{0}, at, S("graphed"));
  EXPECT_EQ(metric(tree, kernel, "cycles"), 100);
  EXPECT_EQ(metric(tree, tree.child(PhaseId{0}, kernel, S("body")), "count"), 2);
  // Updated from a graph with no slots of Proton's: its replays have nothing to copy out.
  buffers.onGraphExecUpdated(exec, reinterpret_cast<Graph>(0x6200));
  EXPECT_EQ(buffers.replayKey(exec), 0u);
  const size_t copies = fake::asyncCopies;
  buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7878), &entry, 1);
  EXPECT_EQ(fake::asyncCopies, copies);
  buffers.removeUser();
  testing::internal::GetCapturedStderr();
}

// Another thread began capturing the launch's stream after its slot was handed out (from the
// eager ring): the launch was captured, and every replay of the graph will write into that
// slot. It is never handed out again, and the launch is counted as unrecorded (before, later
// launches got the same bytes, and the replays' records landed in theirs).
TEST(IntraKernelBuffersGraphs, AnEagerSlotWhoseLaunchWasCapturedIsNeverHandedOutAgain) {
  Driver driver = fake::driver();
  IntraKernelBuffers buffers;
  const instrumentation::ScopeTable table = startGraphed(buffers, driver);
  Session tree{SessionId{37}, instrumentation()};
  LaunchEntry entry{&tree, kRootNode, PhaseId{0}, false};
  testing::internal::CaptureStderr();
  Counter &unrecorded = Stats::global().counter("instrumentation_graph_launches_unrecorded");
  const uint64_t before = unrecorded.value();
  uint64_t captured = 0;
  ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &captured),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(42, &entry, 1, "graphed", StringId{});
  buffers.launchReturned(/*captured=*/true);
  EXPECT_EQ(unrecorded.value(), before + 1);
  for (int drain = 0; drain < 3; ++drain) {
    // A replay adds into the pinned slot; the eager launches around it are filed alone.
    ASSERT_TRUE(fake::oneWarpTreeRan(table.hash, table.unitBytes, captured));
    uint64_t ptr = 0;
    ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
              IntraKernelBuffers::Alloc::kOk);
    EXPECT_NE(ptr, captured);
    buffers.bindLaunch(43 + drain, &entry, 1, "graphed", StringId{});
    buffers.launchReturned();
    buffers.drain(driver);
  }
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("graphed"));
  EXPECT_EQ(metric(tree, kernel, "cycles"), -1);  // the eager launches never ran: nothing
  EXPECT_EQ(unrecorded.value(), before + 1);
  buffers.removeUser();
  testing::internal::GetCapturedStderr();
}

// A trace launch captured into a graph records every replay too (before, it ran unrecorded):
// each replay's events are copied out of the arena slot into a ring slot and filed as a
// launch of their own, then the slot is cleared for the next replay.
TEST(IntraKernelBuffersGraphs, EveryTraceReplayIsFiledWithItsSlices) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  startRecording(buffers, driver, /*maxTraceEvents=*/100, /*traceCapacity=*/4);
  fake::ringMemory.assign((uint64_t{1} << 20) + (uint64_t{1} << 17), 0);
  addOneWarpTraceTable(buffers);
  Session trace{SessionId{34}, traceInstrumentation()};
  LaunchEntry entry{&trace, kRootNode, PhaseId{0}, false};
  uint64_t eager = 0, captured = 0;
  ASSERT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, 0x7777, &eager),
            IntraKernelBuffers::Alloc::kOk);  // makes the ring and its arena
  buffers.bindLaunch(400, &entry, 1, "_Z8one_warpPf", StringId{});
  oneWarpRan(eager);
  buffers.launchReturned();
  fake::capturing = true;
  ASSERT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, 0x7777, &captured),
            IntraKernelBuffers::Alloc::kOk);
  EXPECT_EQ(captured, 0x100000u + (uint64_t{1} << 20));  // in the arena past the ring
  buffers.bindCaptured(CaptureContext{}, "_Z8one_warpPf");
  fake::capturing = false;
  const auto exec = reinterpret_cast<GraphExec>(0x7100);
  buffers.onGraphExecCreated(exec, fake::kGraph);
  for (int replay = 0; replay < 2; ++replay) {
    oneWarpRan(captured);
    buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7777), &entry, 1);
    EXPECT_EQ(fake::ringMemory[captured - 0x100000 + 24], 0);  // cleared for the next replay
  }
  buffers.drain(driver);
  EXPECT_EQ(slicesOf(trace), 3u);  // the eager launch and the two replays
  buffers.removeUser();
}

// A loop of trace replays fills the ring too, and nothing else drains it: a replay that finds
// it full drains it once every eager launch in it has its kernel record (before, every later
// replay ran unrecorded until a flush); while one has not, the replay is counted unrecorded.
TEST(IntraKernelBuffersGraphs, ATraceReplayThatFindsTheRingFullDrainsItOnceRecordsAreIn) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  startRecording(buffers, driver, /*maxTraceEvents=*/100000, /*traceCapacity=*/4);
  fake::ringMemory.assign((uint64_t{1} << 20) + (uint64_t{1} << 17), 0);
  addOneWarpTraceTable(buffers);
  Session trace{SessionId{35}, traceInstrumentation()};
  LaunchEntry entry{&trace, kRootNode, PhaseId{0}, false};
  uint64_t eager = 0, captured = 0;
  ASSERT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, 0x7777, &eager),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindLaunch(500, &entry, 1, "_Z8one_warpPf", StringId{});
  oneWarpRan(eager);
  buffers.launchReturned();
  fake::capturing = true;
  ASSERT_EQ(buffers.allocate(driver, kOneWarpUnitBytes, true, 0x7777, &captured),
            IntraKernelBuffers::Alloc::kOk);
  buffers.bindCaptured(CaptureContext{}, "_Z8one_warpPf");
  fake::capturing = false;
  const auto exec = reinterpret_cast<GraphExec>(0x7200);
  buffers.onGraphExecCreated(exec, fake::kGraph);
  Counter &unrecorded = Stats::global().counter("instrumentation_graph_launches_unrecorded");
  Counter &drains = Stats::global().counter("instrumentation_ring_drains");
  const uint64_t unrecordedBefore = unrecorded.value(), drainsBefore = drains.value();
  auto replay = [&] {
    oneWarpRan(captured);
    buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7878), &entry, 1);
  };
  // 256-byte slots: the eager launch and 4095 replays fill the 1 MB ring; the next replay
  // finds it full with the eager launch's record not in yet.
  for (int i = 0; i < 4096; ++i) replay();
  EXPECT_EQ(unrecorded.value(), unrecordedBefore + 1);
  EXPECT_EQ(drains.value(), drainsBefore);
  buffers.noteKernel(500, 5000);
  for (int i = 0; i < 3; ++i) replay();  // the first drains the ring, then all are filed
  EXPECT_EQ(drains.value(), drainsBefore + 1);
  EXPECT_EQ(unrecorded.value(), unrecordedBefore + 1);
  buffers.drain(driver);
  EXPECT_EQ(slicesOf(trace), 1u + 4095 + 3);
  EXPECT_EQ(fake::contextSyncs, 0u);
  buffers.removeUser();
}

}  // namespace
}  // namespace proton::gpu
