// The CUPTI translation and correlation layer fed with real CUPTI record structs built here:
// translateKernel -> LaunchTable -> KernelAttributor -> Session, no GPU needed.
#include "backends/cupti/cupti_translate.h"

#include <gtest/gtest.h>

#include "backends/capture_registry.h"
#include "backends/cupti/cupti_test_records.h"
#include "backends/kernel_attributor.h"
#include "backends/launch_table.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
uint64_t stat(const char *name) { return Stats::global().counter(name).value(); }

class CuptiTranslateTest : public ::testing::Test {
 protected:
  CuptiTranslateTest() : session_(SessionId{900}, options()), attributor_(table_, captures_) {
    session_.setActive(true);
  }
  static SessionOptions options(DataKind data = DataKind::kTree) {
    SessionOptions o;
    o.path = "unused";
    o.data = data;
    return o;
  }

  // Records a launch by the "launching thread" under ROOT/<scope>.
  NodeId launch(uint32_t correlation, const std::string &scope, bool multi = false,
                Session *s = nullptr) {
    Session &target = s ? *s : session_;
    NodeId node = target.child(target.currentPhase(), kRootNode, S(scope));
    LaunchEntry e{&target, node, target.currentPhase()};
    table_.record(correlation, &e, 1, multi, /*launchNs=*/1000 + correlation, /*thread=*/42);
    return node;
  }

  // Feeds one CUPTI record through the real translation and attribution code.
  void deliver(const KernelActivity &record) {
    KernelRecord k;
    ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&record), k));
    attributor_.add(k);
  }

  // (count, time) of kernel `name` under the path of scope names, in phase 0.
  std::pair<uint64_t, uint64_t> kernelAt(Session &s, std::vector<std::string> path,
                                         const std::string &name, PhaseId phase = PhaseId{0}) {
    std::pair<uint64_t, uint64_t> out{0, 0};
    s.readPhase(phase, [&](const PhaseData &p) {
      NodeId node = kRootNode;
      path.push_back(name);
      for (const std::string &n : path) {
        node = p.tree.findChild(node, S(n));
        if (node == kNoNode) return;
      }
      if (const KernelMetric *k = p.kernel(node)) out = {k->count, k->timeNs};
    });
    return out;
  }

  LaunchTable table_{1024};
  CaptureRegistry captures_;
  Session session_;
  KernelAttributor attributor_;
};

TEST_F(CuptiTranslateTest, TranslatesEveryFieldOfAKernelRecord) {
  KernelActivity r = kernelRecord(17, "vadd", 100, 350, 9);
  r.deviceId = 3;
  r.contextId = 5;
  r.gridId = 44;
  r.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  KernelRecord k;
  ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&r), k));
  EXPECT_EQ(k.correlation, 17u);
  EXPECT_EQ(k.startNs, 100u);
  EXPECT_EQ(k.endNs, 350u);
  EXPECT_EQ(k.device, 3);
  EXPECT_EQ(k.stream, 7u);
  EXPECT_STREQ(k.name, "vadd");
  EXPECT_EQ(k.graphNodeId, 9u);
  EXPECT_EQ(k.context, 5u);
  EXPECT_EQ(k.gridId, 44);
  EXPECT_EQ(k.deviceType, DeviceType::kCuda);
}

TEST_F(CuptiTranslateTest, IgnoresRecordsThatAreNotKernels) {
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  KernelRecord k;
  EXPECT_FALSE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&copy), k));
}

TEST_F(CuptiTranslateTest, OutOfOrderRecordsReachTheirOwnLaunchContexts) {
  launch(1, "a");
  launch(2, "b");
  launch(3, "a");
  EXPECT_EQ(session_.pendingIn(PhaseId{0}), 3);
  deliver(kernelRecord(3, "k", 0, 30));
  deliver(kernelRecord(1, "k", 0, 10));
  deliver(kernelRecord(2, "k", 0, 20));
  EXPECT_EQ(kernelAt(session_, {"a"}, "k"), std::make_pair(uint64_t(2), uint64_t(40)));
  EXPECT_EQ(kernelAt(session_, {"b"}, "k"), std::make_pair(uint64_t(1), uint64_t(20)));
  EXPECT_EQ(session_.pendingIn(PhaseId{0}), 0);
  EXPECT_EQ(table_.outstanding(), 0);
}

TEST_F(CuptiTranslateTest, RecordsForADeactivatedSessionKeepTheirLaunchContext) {
  launch(10, "step");
  session_.setActive(false);  // deactivated while the kernel is in flight
  deliver(kernelRecord(10, "k", 5, 9));
  EXPECT_EQ(kernelAt(session_, {"step"}, "k"), std::make_pair(uint64_t(1), uint64_t(4)));
}

TEST_F(CuptiTranslateTest, UnknownCorrelationIsCountedAndFilesNothing) {
  uint64_t before = stat("kernel_records_unmatched");
  deliver(kernelRecord(555, "k", 0, 10));
  EXPECT_EQ(stat("kernel_records_unmatched"), before + 1);
  session_.readPhase(PhaseId{0}, [](const PhaseData &p) { EXPECT_EQ(p.tree.size(), 1u); });
}

TEST_F(CuptiTranslateTest, LaunchWithNoRecordingSessionIsDroppedSilently) {
  uint64_t before = stat("kernel_records_unmatched");
  table_.record(20, nullptr, 0, false, 0, 0);
  deliver(kernelRecord(20, "k", 0, 10));
  EXPECT_EQ(stat("kernel_records_unmatched"), before);
  EXPECT_EQ(table_.outstanding(), 0);
}

TEST_F(CuptiTranslateTest, GraphReplayFilesKernelsUnderCapturedAtAndTheCaptureContext) {
  captures_.add(77, CaptureContext{{S("model"), S("layer")}, {}, {}, {}});
  captures_.alias(78, 77);  // the instantiated copy of node 77
  launch(30, "replay", /*multi=*/true);
  deliver(kernelRecord(30, "gk", 0, 5, 77));
  deliver(kernelRecord(30, "gk", 10, 15, 78));
  EXPECT_EQ(kernelAt(session_, {"replay", "<captured_at>", "model", "layer"}, "gk"),
            std::make_pair(uint64_t(2), uint64_t(10)));
  EXPECT_EQ(table_.outstanding(), 0);  // graph launches are never pending
}

TEST_F(CuptiTranslateTest, GraphCapturedBeforeProfilingKeepsTheLaunchContextAndIsCounted) {
  uint64_t before = stat("graph_kernels_without_capture_context");
  launch(40, "replay", /*multi=*/true);
  deliver(kernelRecord(40, "gk", 0, 5, 12345));
  deliver(kernelRecord(40, "gk", 0, 5, 12345));
  EXPECT_EQ(kernelAt(session_, {"replay"}, "gk"), std::make_pair(uint64_t(2), uint64_t(10)));
  EXPECT_EQ(stat("graph_kernels_without_capture_context"), before + 2);
}

TEST_F(CuptiTranslateTest, RemovedGraphNodesAreForgottenAfterTheNextFlush) {
  captures_.add(5, CaptureContext{{S("x")}, {}, {}, {}});
  EXPECT_EQ(captures_.size(), 1u);
  captures_.remove(5);
  EXPECT_NE(captures_.find(5), nullptr);  // its last replays' records may still come
  uint64_t mark = captures_.retiredMark();
  captures_.add(6, CaptureContext{{S("y")}, {}, {}, {}});
  captures_.remove(6);  // destroyed while the flush runs: kept for the next one
  captures_.forgetRetired(mark);
  EXPECT_EQ(captures_.find(5), nullptr);
  EXPECT_NE(captures_.find(6), nullptr);
  captures_.forgetRetired(captures_.retiredMark());
  EXPECT_EQ(captures_.size(), 0u);
}

TEST_F(CuptiTranslateTest, RetiredGraphNodesAreBoundedOldestFirst) {
  for (uint64_t i = 1; i <= CaptureRegistry::kMaxRetired + 2; ++i) {
    captures_.add(i, CaptureContext{{S("r")}, {}, {}, {}});
    captures_.remove(i);
  }
  EXPECT_EQ(captures_.retired(), CaptureRegistry::kMaxRetired);
  EXPECT_EQ(captures_.find(2), nullptr);
  EXPECT_NE(captures_.find(3), nullptr);
}

TEST_F(CuptiTranslateTest, CancelledLaunchIsNoLongerPending) {
  launch(50, "s");
  EXPECT_EQ(table_.outstanding(), 1);
  table_.cancel(50);  // failed, or captured into a graph
  EXPECT_EQ(table_.outstanding(), 0);
  EXPECT_EQ(session_.pendingIn(PhaseId{0}), 0);
}

TEST_F(CuptiTranslateTest, OverwrittenSlotIsCountedAndItsRecordUnmatched) {
  LaunchTable small(4);
  KernelAttributor attributor(small, captures_);
  NodeId node = session_.child(PhaseId{0}, kRootNode, S("s"));
  LaunchEntry e{&session_, node, PhaseId{0}};
  uint64_t overwritten = stat("launch_correlations_overwritten");
  uint64_t unmatched = stat("kernel_records_unmatched");
  small.record(1, &e, 1, false, 0, 0);
  small.record(5, &e, 1, false, 0, 0);  // same slot as 1, whose record is given up
  EXPECT_EQ(stat("launch_correlations_overwritten"), overwritten + 1);
  KernelRecord k;
  KernelActivity r = kernelRecord(1, "k", 0, 1);
  ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&r), k));
  attributor.add(k);
  EXPECT_EQ(stat("kernel_records_unmatched"), unmatched + 1);
  EXPECT_EQ(small.outstanding(), 1);  // only launch 5 is still in flight
  EXPECT_EQ(session_.pendingIn(PhaseId{0}), 1);
}

TEST_F(CuptiTranslateTest, PhaseCompletesWhenItsLastKernelArrives) {
  launch(60, "s");
  EXPECT_EQ(session_.advancePhase(), PhaseId{1});
  EXPECT_FALSE(session_.isPhaseComplete(PhaseId{0}));
  deliver(kernelRecord(60, "k", 0, 1));
  EXPECT_TRUE(session_.isPhaseComplete(PhaseId{0}));
  EXPECT_EQ(kernelAt(session_, {"s"}, "k", PhaseId{0}).first, 1u);
}

TEST_F(CuptiTranslateTest, TraceSessionGetsASliceOnTheStreamLane) {
  Session trace(SessionId{901}, options(DataKind::kTrace));
  NodeId node = launch(70, "step", false, &trace);
  deliver(kernelRecord(70, "tk", 2000, 2500));
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    ASSERT_EQ(p.events().size(), 1u);
    const TraceEvent &e = p.events()[0];
    EXPECT_EQ(e.name, S("tk"));
    EXPECT_EQ(p.tree.findChild(node, S("tk")), e.context);
    EXPECT_EQ(e.lane.kind, Lane::Kind::kGpuStream);
    EXPECT_EQ(e.lane.id, 7u);
    EXPECT_EQ(e.beginNs, 2000u);
    EXPECT_EQ(e.endNs, 2500u);
    EXPECT_EQ(e.launchNs, 1070u);
    EXPECT_EQ(e.launchThread, 42u);
    EXPECT_EQ(e.correlation, 70u);
    EXPECT_EQ(p.devices().at(DeviceType::kCuda).count(0), 1u);
  });
}

// A flush that could not synchronise a kernel's context forces out the record of a kernel
// still running: no end. Its launch counts, its time is not guessed, and the record is
// counted; a trace gets no slice without an end. (Before, a 3 s kernel was filed as 0 ns with
// nothing said.)
TEST_F(CuptiTranslateTest, ARecordWithoutAnEndCountsItsLaunchNotItsTime) {
  Session trace(SessionId{902}, options(DataKind::kTrace));
  const uint64_t before = stat("kernel_records_untimed");
  launch(80, "s");
  launch(81, "s");
  launch(82, "t", false, &trace);
  deliver(kernelRecord(80, "k", 5000, 5400));
  deliver(kernelRecord(81, "k", 6000, 0));
  deliver(kernelRecord(82, "k", 7000, 0));
  EXPECT_EQ(kernelAt(session_, {"s"}, "k"), std::make_pair(uint64_t(2), uint64_t(400)));
  EXPECT_EQ(stat("kernel_records_untimed"), before + 2);
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) { EXPECT_TRUE(p.events().empty()); });
  EXPECT_EQ(table_.outstanding(), 0);
}

TEST_F(CuptiTranslateTest, KernelNamesAreDemangledOnce) {
  EXPECT_EQ(StringTable::global().view(attributor_.kernelName("_Z4vaddPfi")), "vadd(float*, int)");
  EXPECT_EQ(StringTable::global().view(attributor_.kernelName("triton_poi_fused")),
            "triton_poi_fused");
}

TEST_F(CuptiTranslateTest, LaunchCallbacksCoverRuntimeDriverAndGraphLaunches) {
  EXPECT_TRUE(
      isGraphLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  EXPECT_TRUE(isGraphLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  EXPECT_FALSE(isGraphLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  bool hasLaunchKernel = false;
  for (size_t i = 0; i < kNumRuntimeLaunchCallbacks; ++i)
    hasLaunchKernel |=
        kRuntimeLaunchCallbacks[i] == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  EXPECT_TRUE(hasLaunchKernel);
}

}  // namespace
}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
