// The CUPTI launch callback's part in the GPU-side logic: which kernel each driver launch
// callback launches, and how LaunchTracker ties instrumented launches to their intra-kernel
// slots (through the driver with no GPU, backends/gpu/fake_driver.h).
#include <gtest/gtest.h>

#include <string>

#include "backends/capture_registry.h"
#include "backends/cupti/cupti_graphs.h"
#include "backends/gpu/fake_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "backends/launch_table.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

using cupti::InternalLaunchGuard;
using cupti::LaunchTracker;

// Every driver call that launches a kernel names it in its parameters (the native scopes look
// up its module there); other calls launch none. (A cooperative launch was once missed.)
template <typename Params>
CUfunction launchedBy(CUpti_CallbackId cbid, CUfunction function) {
  Params params{};
  params.f = function;
  return cupti::launchedFunction(cbid, &params);
}

TEST(CuptiLaunches, EveryKernelLaunchCallNamesItsFunction) {
  const auto f = reinterpret_cast<CUfunction>(0xf00);
  EXPECT_EQ(launchedBy<cuLaunchKernel_params>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, f), f);
  EXPECT_EQ(launchedBy<cuLaunchKernel_ptsz_params>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, f),
            f);
  EXPECT_EQ(launchedBy<cuLaunchKernelEx_params>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, f), f);
  EXPECT_EQ(
      launchedBy<cuLaunchKernelEx_ptsz_params>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, f),
      f);
  EXPECT_EQ(launchedBy<cuLaunchCooperativeKernel_params>(
                CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, f),
            f);
  EXPECT_EQ(launchedBy<cuLaunchCooperativeKernel_ptsz_params>(
                CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, f),
            f);
  int graphParams[4] = {};
  EXPECT_EQ(cupti::launchedFunction(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, graphParams), nullptr);
  EXPECT_EQ(cupti::launchedFunction(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, graphParams), nullptr);
}

// Proton's own launches (a drain's reduction, launched holding the buffers' lock) leave the
// launching thread's pending launch alone: before, one made on a thread where a too-large
// launch was pending took that lock again to warn, and the drain hung; the warning names the
// user's kernel at its own launch.
TEST(IntraKernelBuffersAllocate, ProtonsOwnLaunchesLeaveThePendingLaunchAlone) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  buffers.addUser();
  buffers.setLimits(uint64_t{1} << 20, 0, 256);
  LaunchTable table(64);
  CaptureRegistry captures;
  LaunchTracker tracker(table, captures);
  uint32_t correlation = 1;
  auto launch = [&](const char *symbol) {
    int result = 0;  // kSuccess
    CUpti_CallbackData cb{};
    cb.callbackSite = CUPTI_API_ENTER;
    cb.correlationId = correlation++;
    cb.symbolName = symbol;
    cb.functionReturnValue = &result;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
    cb.callbackSite = CUPTI_API_EXIT;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
  };
  uint64_t ptr = 1;
  ASSERT_EQ(buffers.allocate(driver, uint64_t{4} << 20, true, 0x7777, &ptr),
            IntraKernelBuffers::Alloc::kOff);
  testing::internal::CaptureStderr();
  {
    InternalLaunchGuard internal;
    launch("proton_tree_reduce");
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  launch("_Z9big_againPf");
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("kernel big_again(float*): a launch needs 4.0 MB"), std::string::npos)
      << said;
  buffers.removeUser();
}

// The launch callback binds a slot handed out while its stream captured to the graph being
// captured (with the context of the capture), not to the launch: the launch never runs, and
// it is each launch of the executable graph that copies the slot out.
TEST(IntraKernelBuffersAllocate, ALaunchBeingCapturedIsBoundToItsGraphByTheLaunchCallback) {
  Driver driver = fake::driver();
  fake::reset(fake::kOther);
  fake::ringMemory.assign((uint64_t{1} << 21), 0);
  IntraKernelBuffers &buffers = IntraKernelBuffers::global();
  startRecording(buffers, driver);
  LaunchTable table(64);
  CaptureRegistry captures;
  LaunchTracker tracker(table, captures);
  auto launch = [&](uint32_t correlation) {
    int result = 0;  // kSuccess
    CUpti_CallbackData cb{};
    cb.callbackSite = CUPTI_API_ENTER;
    cb.correlationId = correlation;
    cb.symbolName = "_Z7graphedPf";
    cb.functionReturnValue = &result;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
    cb.callbackSite = CUPTI_API_EXIT;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
  };
  testing::internal::CaptureStderr();
  uint64_t ptr = 0;
  ASSERT_EQ(buffers.allocate(driver, 64, false, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOk);
  launch(50);  // an eager launch: the ring and its arena exist from here on
  fake::capturing = true;
  ASSERT_EQ(buffers.allocate(driver, 64, false, 0x7777, &ptr), IntraKernelBuffers::Alloc::kOk);
  ASSERT_TRUE(buffers.pendingCapture());
  launch(51);
  EXPECT_FALSE(buffers.pendingCapture());
  fake::capturing = false;
  const auto exec = reinterpret_cast<GraphExec>(0x7100);
  buffers.onGraphExecCreated(exec, fake::kGraph);
  Session session{SessionId{41}, instrumentation()};
  LaunchEntry entry{&session, kRootNode, PhaseId{0}, false};
  buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7777), &entry, 1);
  EXPECT_EQ(fake::asyncCopies, 1u);  // the captured slot, copied out for this replay
  buffers.onGraphExecDestroyed(exec);
  buffers.onGraphLaunched(exec, reinterpret_cast<Stream>(0x7777), &entry, 1);
  EXPECT_EQ(fake::asyncCopies, 1u);  // an executable destroyed: nothing of it is known
  buffers.drain(driver);
  buffers.removeUser();
  testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace proton::gpu
