// Drains of full rings of tree launches, through the GPU tree reduction (run by the fake
// driver as its host twin, reduceTreeSlot).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <variant>

#include "backends/cupti/intra_kernel_buffers.h"
#include "backends/cupti/intra_kernel_fake_driver.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::cupti {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }

SessionOptions instrumentation() {
  SessionOptions options;
  options.backend = BackendKind::kInstrumentation;
  return options;
}

double metric(Session &session, NodeId node, const char *name) {
  double value = -1;
  session.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    const FlexMetrics *f = p.flex(node);
    const NamedMetric *m = f ? f->find(S(name)) : nullptr;
    if (m)
      value = std::holds_alternative<double>(m->value)
                  ? std::get<double>(m->value)
                  : static_cast<double>(std::get<int64_t>(m->value));
  });
  return value;
}

// Launches that fill the 1 MB ring several times over, each drained as the backend does when
// the ring is full (not waiting for filing), then a flush: every launch's sums are reduced on
// the GPU, read back and filed (on the filing thread), none twice, none lost.
TEST(IntraKernelBuffersDrain, FullTreeRingsAreReducedOnTheGpuAndEveryLaunchIsFiled) {
  CudaDriverApi driver = fake::driverWithReduction();
  fake::reset(fake::kOther);
  IntraKernelBuffers buffers;
  startRecording(buffers, driver, /*maxTraceEvents=*/0, /*traceCapacity=*/4);
  // The ring, its graph arena, then the reduction's descriptors and output.
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  fake::ringMemory.assign((size_t{1} << 20) + (size_t{1} << 17) + 4096 * (16 + kOut), 0);
  instrumentation::ScopeTable table;
  table.kernel = "summed";
  table.hash = 0x7ee;
  table.paths = {"", "body"};
  table.numWarps = table.unitWarps = table.unitsPerCta = 1;
  table.unitBytes = instrumentation::kTreeUnitHeaderBytes + 2 * instrumentation::kTreeScopeBytes;
  buffers.tables().add(table);
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
    buffers.bindLaunch(1000 + i, &entry, 1, "summed", StringId{});
    // The launch's one warp ran: kernel 100 cycles, "body" 30 in 2 runs.
    uint8_t *slot = fake::deviceBytes(ptr, 64);
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

}  // namespace
}  // namespace proton::cupti
