// Drains of full rings of tree launches, through the GPU tree reduction (run by the fake
// driver as its host twin, reduceTreeSlot).
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cupti/intra_kernel_buffers.h"
#include "backends/cupti/intra_kernel_fake_driver.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::cupti {
namespace {

// A one-warp tree kernel with one scope of its own, "body".
instrumentation::ScopeTable summedTable() {
  instrumentation::ScopeTable table;
  table.kernel = "summed";
  table.hash = 0x7ee;
  table.paths = {"", "body"};
  table.numWarps = table.unitWarps = table.unitsPerCta = 1;
  table.unitBytes = instrumentation::kTreeUnitHeaderBytes + 2 * instrumentation::kTreeScopeBytes;
  return table;
}

// The launch's one warp ran, into its slot at `ptr`: kernel 100 cycles, "body" 30 in 2 runs.
void summedRan(const instrumentation::ScopeTable &table, uint64_t ptr) {
  uint8_t *slot = fake::deviceBytes(ptr, 64);
  ASSERT_NE(slot, nullptr);
  uint32_t header[4] = {table.hash, table.unitBytes, 1, 0}, record[4] = {0, 0, 1, 0};
  uint64_t kernelCycles = 100, bodyCycles = 30;
  uint32_t kernelCount[2] = {1, 1}, bodyCount[2] = {2, 1};
  std::memcpy(slot, header, 16);
  std::memcpy(slot + 16, record, 16);
  std::memcpy(slot + 32, &kernelCycles, 8);
  std::memcpy(slot + 40, kernelCount, 8);
  std::memcpy(slot + 48, &bodyCycles, 8);
  std::memcpy(slot + 56, bodyCount, 8);
}

// `buffers` recording through `driver` into a 1 MB ring (device memory for it, its graph
// arena, then the reduction's descriptors and output), with the summed kernel's table.
instrumentation::ScopeTable startSummed(IntraKernelBuffers &buffers, const CudaDriverApi &driver) {
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
  summedRan(table, ptr);
}

// Launches that fill the 1 MB ring several times over, each drained as the backend does when
// the ring is full (not waiting for filing), then a flush: every launch's sums are reduced on
// the GPU, read back and filed (on the filing thread), none twice, none lost.
TEST(IntraKernelBuffersDrain, FullTreeRingsAreReducedOnTheGpuAndEveryLaunchIsFiled) {
  CudaDriverApi driver = fake::driverWithReduction();
  IntraKernelBuffers buffers;
  instrumentation::ScopeTable table = startSummed(buffers, driver);
  Session tree{SessionId{51}, instrumentation()};
  LaunchEntry entry{&tree, kRootNode, PhaseId{0}, false};
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
  buffers.removeUser();
}

// A drain copies, reduces and clears on a stream of Proton's own, in relaxed capture mode,
// with the GPU reduction or without it: nothing of it is on the legacy stream, which waits
// for blocking streams (one being captured among them). Its one wait for the ring's launches
// is still a context synchronisation (README, known issues: a capture on another thread).
TEST(IntraKernelBuffersDrain, ADrainRunsInRelaxedCaptureModeOffTheLegacyStream) {
  for (bool gpuReduction : {true, false}) {
    CudaDriverApi driver = gpuReduction ? fake::driverWithReduction() : fake::driver();
    IntraKernelBuffers buffers;
    instrumentation::ScopeTable table = startSummed(buffers, driver);
    Session tree{SessionId{52}, instrumentation()};
    LaunchEntry entry{&tree, kRootNode, PhaseId{0}, false};
    for (int i = 0; i < 3; ++i) {
      uint64_t ptr = 0;
      ASSERT_EQ(buffers.allocate(driver, table.unitBytes, false, 0x7777, &ptr),
                IntraKernelBuffers::Alloc::kOk);
      launchSummed(buffers, table, ptr, 2000 + i, entry);
    }
    fake::legacyCopies = fake::syncMemsets = 0;
    fake::modesAtSync.clear();
    testing::internal::CaptureStderr();  // without the reduction: said once
    buffers.drain(driver);
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(fake::legacyCopies, 0u) << gpuReduction;
    EXPECT_EQ(fake::syncMemsets, 0u) << gpuReduction;
    ASSERT_FALSE(fake::modesAtSync.empty());
    for (CUstreamCaptureMode mode : fake::modesAtSync)
      EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED) << gpuReduction;
    EXPECT_EQ(fake::captureMode, CU_STREAM_CAPTURE_MODE_GLOBAL);  // the thread's, put back
    NodeId body = tree.child(PhaseId{0}, tree.child(PhaseId{0}, kRootNode, S("summed")), S("body"));
    EXPECT_EQ(metric(tree, body, "count"), 6.0) << gpuReduction;
    buffers.removeUser();
  }
}

}  // namespace
}  // namespace proton::cupti
