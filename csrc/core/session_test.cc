#include "core/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/stats.h"
#include "core/string_table.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
NamedMetric M(const std::string &name, MetricValue v) {
  return {MetricSpec::parse(name), std::move(v)};
}

// Copies of what a phase holds, read under the session lock.
const MetricValue *flexValue(const PhaseData &p, NodeId node, const std::string &name) {
  const FlexMetrics *f = p.flex(node);
  const NamedMetric *m = f ? f->find(S(name)) : nullptr;
  return m ? &m->value : nullptr;
}

class SessionTest : public ::testing::Test {
 protected:
  Session s{SessionId{3}, SessionOptions{}};
};

TEST_F(SessionTest, StartsInactiveWithPhaseZero) {
  EXPECT_EQ(s.id(), SessionId{3});
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.currentPhase(), PhaseId{0});
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{0}}));
  s.setActive(true);
  EXPECT_TRUE(s.active());
}

TEST_F(SessionTest, ChildNeedsAnExistingPhaseAndParent) {
  NodeId a = s.child(PhaseId{0}, kRootNode, S("a"));
  EXPECT_EQ(a, NodeId{1});
  EXPECT_EQ(s.child(PhaseId{0}, kRootNode, S("a")), a);
  EXPECT_EQ(s.child(PhaseId{5}, kRootNode, S("a")), kNoNode);
  EXPECT_EQ(s.child(PhaseId{0}, NodeId{99}, S("a")), kNoNode);
}

TEST_F(SessionTest, AddMetricsAccumulatesOnTheNode) {
  NodeId n = s.child(PhaseId{0}, kRootNode, S("step"));
  ASSERT_TRUE(
      s.addMetrics(PhaseId{0}, n, {M("flops", int64_t{2}), M("tag", std::string("x"))}).isOk());
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("flops", int64_t{3})}).isOk());
  EXPECT_TRUE(s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<double>(*flexValue(p, n, "flops")), 5.0);  // "flops*" are floats
    EXPECT_EQ(std::get<std::string>(*flexValue(p, n, "tag")), "x");
    EXPECT_EQ(p.flex(kRootNode), nullptr);
  }));
}

TEST_F(SessionTest, TypeConflictNamesBothTypesAndChangesNothing) {
  NodeId n = s.child(PhaseId{0}, kRootNode, S("step"));
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("m", int64_t{1})}).isOk());
  Status st = s.addMetrics(PhaseId{0}, n, {M("fresh", int64_t{7}), M("m", std::string("x"))});
  EXPECT_EQ(st.code(), StatusCode::kMetricType);
  EXPECT_EQ(st.message(), "[PROTON] Metric value type mismatch for 'm': current=int, new=str");
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<int64_t>(*flexValue(p, n, "m")), 1);
    EXPECT_EQ(flexValue(p, n, "fresh"), nullptr);
  });
  // "fresh" had no type recorded by the failed call: a string is still accepted for it.
  EXPECT_TRUE(s.addMetrics(PhaseId{0}, n, {M("fresh", std::string("a"))}).isOk());
  EXPECT_EQ(s.checkMetricTypes({M("fresh", int64_t{1})}).message(),
            "[PROTON] Metric value type mismatch for 'fresh': current=str, new=int");
}

TEST_F(SessionTest, TypeMismatchStringAndList) {
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, kRootNode, {M("label (pty)", std::string("a"))}).isOk());
  Status st = s.addMetrics(PhaseId{0}, kRootNode, {M("label", std::vector<double>{1.0})});
  EXPECT_EQ(st.message(), "[PROTON] Metric value type mismatch for 'label': current=str, new=list");
}

TEST_F(SessionTest, ConflictsAreFoundAcrossPhases) {
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, kRootNode, {M("v", int64_t{1})}).isOk());
  PhaseId p1 = s.advancePhase();
  EXPECT_EQ(s.addMetrics(p1, kRootNode, {M("v", std::string("x"))}).code(),
            StatusCode::kMetricType);
}

TEST_F(SessionTest, SameNameTwiceInOneListAsStringAndNumberIsAnError) {
  // Regression: this used to pass the check and abort in combineMetric.
  Status st =
      s.addMetrics(PhaseId{0}, kRootNode, {M("a", int64_t{1}), M("a (exc)", std::string("s"))});
  EXPECT_EQ(st.code(), StatusCode::kMetricType);
}

TEST_F(SessionTest, IntoAFloatMetricAnIntIsConverted) {
  NodeId n = s.child(PhaseId{0}, kRootNode, S("k"));
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("util", 0.5)}).isOk());
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("util", int64_t{2})}).isOk());
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<double>(*flexValue(p, n, "util")), 2.5);
  });
}

TEST_F(SessionTest, IntoAnIntMetricAWholeFloatIsConverted) {
  NodeId n = s.child(PhaseId{0}, kRootNode, S("k"));
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("tokens", int64_t{3})}).isOk());
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("tokens", 4.0)}).isOk());
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<int64_t>(*flexValue(p, n, "tokens")), 7);
  });
}

TEST_F(SessionTest, AFractionalFloatWidensAnIntMetricEverywhere) {
  NodeId a = s.child(PhaseId{0}, kRootNode, S("a"));
  NodeId b = s.child(PhaseId{0}, kRootNode, S("b"));
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, a, {M("w", int64_t{3})}).isOk());
  PhaseId p1 = s.advancePhase();
  NodeId c = s.child(p1, kRootNode, S("c"));
  ASSERT_TRUE(s.addMetrics(p1, c, {M("w", int64_t{1})}).isOk());
  // In one list: the int before the fraction is widened too.
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, b, {M("w", int64_t{1}), M("w (exc)", 0.25)}).isOk());
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<double>(*flexValue(p, a, "w")), 3.0);
    EXPECT_EQ(std::get<double>(*flexValue(p, b, "w")), 1.25);
  });
  s.readPhase(p1,
              [&](const PhaseData &p) { EXPECT_EQ(std::get<double>(*flexValue(p, c, "w")), 1.0); });
  ASSERT_TRUE(s.addMetrics(p1, c, {M("w", int64_t{2})}).isOk());
  s.readPhase(p1,
              [&](const PhaseData &p) { EXPECT_EQ(std::get<double>(*flexValue(p, c, "w")), 3.0); });
}

TEST_F(SessionTest, FlopsAreFloatsAndBytesIntsWhateverTheyAreGivenAs) {
  NodeId n = s.child(PhaseId{0}, kRootNode, S("k"));
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("flops16", int64_t{4}), M("bytes", 8.0)}).isOk());
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, n, {M("flops16", 0.5), M("bytes", int64_t{2})}).isOk());
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    EXPECT_EQ(std::get<double>(*flexValue(p, n, "flops16")), 4.5);
    EXPECT_EQ(std::get<int64_t>(*flexValue(p, n, "bytes")), 10);
  });
}

TEST_F(SessionTest, AnEventTakesTheConvertedValue) {
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, kRootNode, {M("flops", 1.0)}).isOk());
  TraceEvent e;
  e.name = S("k");
  e.context = kRootNode;
  ASSERT_TRUE(s.addEvent(PhaseId{0}, e, {M("flops", int64_t{6})}).isOk());
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    const FlexMetrics &f = p.eventMetrics(p.events()[0].flexSlot);
    EXPECT_EQ(std::get<double>(f.find(S("flops"))->value), 6.0);
  });
}

TEST_F(SessionTest, MetricAggregationsListStrippedNames) {
  ASSERT_TRUE(s.addMetrics(PhaseId{0}, kRootNode,
                           {M("bytes (exc)", int64_t{1}), M("arch (pty)", std::string("sm90")),
                            M("flops", int64_t{1})})
                  .isOk());
  std::vector<std::string> exclusive, property;
  s.metricAggregations(exclusive, property);
  EXPECT_EQ(exclusive, (std::vector<std::string>{"bytes"}));
  EXPECT_EQ(property, (std::vector<std::string>{"arch"}));
}

TEST_F(SessionTest, AdvancePhaseMakesANewCurrentPhase) {
  uint64_t epoch = s.epoch();
  EXPECT_EQ(s.advancePhase(), PhaseId{1});
  EXPECT_EQ(s.advancePhase(), PhaseId{2});
  EXPECT_EQ(s.currentPhase(), PhaseId{2});
  EXPECT_EQ(s.epoch(), epoch + 2);
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{0}, PhaseId{1}, PhaseId{2}}));
  s.readPhase(PhaseId{2}, [](const PhaseData &p) { EXPECT_EQ(p.tree.size(), 1u); });
}

TEST_F(SessionTest, OnlyPhasesBeforeTheCurrentOneAreComplete) {
  EXPECT_FALSE(s.isPhaseComplete(PhaseId{0}));
  s.advancePhase();
  EXPECT_TRUE(s.isPhaseComplete(PhaseId{0}));
  EXPECT_FALSE(s.isPhaseComplete(PhaseId{1}));
  EXPECT_FALSE(s.isPhaseComplete(PhaseId{7}));
}

TEST_F(SessionTest, ClearOnePhase) {
  s.child(PhaseId{0}, kRootNode, S("a"));
  s.advancePhase();
  s.advancePhase();
  s.clear(PhaseId{1}, false);
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{0}, PhaseId{2}}));
  EXPECT_TRUE(s.isPhaseComplete(PhaseId{1}));  // gone: nothing left to wait for
  EXPECT_FALSE(s.readPhase(PhaseId{1}, [](const PhaseData &) {}));
  s.readPhase(PhaseId{0}, [](const PhaseData &p) { EXPECT_EQ(p.tree.size(), 2u); });
}

TEST_F(SessionTest, ClearUpToDropsEarlierPhases) {
  for (int i = 0; i < 3; ++i) s.advancePhase();
  s.clear(PhaseId{1}, true);
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{2}, PhaseId{3}}));
}

TEST_F(SessionTest, ClearingTheCurrentPhaseEmptiesItAndKeepsIt) {
  s.advancePhase();
  NodeId a = s.child(PhaseId{1}, kRootNode, S("a"));
  ASSERT_TRUE(s.addMetrics(PhaseId{1}, a, {M("x", int64_t{1})}).isOk());
  uint64_t epoch = s.epoch();
  s.clear(PhaseId{1}, true);
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{1}}));
  EXPECT_EQ(s.currentPhase(), PhaseId{1});
  EXPECT_EQ(s.epoch(), epoch + 1);
  s.readPhase(PhaseId{1}, [](const PhaseData &p) {
    EXPECT_EQ(p.tree.size(), 1u);
    EXPECT_EQ(p.flex(NodeId{1}), nullptr);
  });
  EXPECT_EQ(s.child(PhaseId{1}, kRootNode, S("b")), NodeId{1});
}

TEST_F(SessionTest, AddKernelTracksMinMaxCountTimeAndDevices) {
  NodeId k = s.child(PhaseId{0}, kRootNode, S("gemm"));
  NodeId k2 = s.child(PhaseId{0}, kRootNode, S("relu"));
  s.addKernel(PhaseId{0}, k, 3000, 1, DeviceType::kCuda);
  s.addKernel(PhaseId{0}, k, 1000, 1, DeviceType::kCuda);
  s.addKernel(PhaseId{0}, k, 2000, 1, DeviceType::kCuda);
  s.addKernel(PhaseId{0}, k2, 10, 0, DeviceType::kCuda);
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    const KernelMetric *m = p.kernel(k);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->timeNs, 6000u);
    EXPECT_EQ(m->count, 3u);
    EXPECT_EQ(m->minNs, 1000u);
    EXPECT_EQ(m->maxNs, 3000u);
    EXPECT_EQ(m->deviceId, 1);
    EXPECT_EQ(m->deviceType, DeviceType::kCuda);
    EXPECT_EQ(p.kernel(kRootNode), nullptr);
    EXPECT_EQ(p.devices(), (std::map<DeviceType, std::set<int32_t>>{{DeviceType::kCuda, {0, 1}}}));
  });
}

TEST_F(SessionTest, KernelForAClearedPhaseIsCounted) {
  Counter &dropped = Stats::global().counter("kernel_records_for_cleared_phase");
  uint64_t before = dropped.value();
  s.advancePhase();
  s.clear(PhaseId{0}, false);
  s.addKernel(PhaseId{0}, kRootNode, 100, 0, DeviceType::kCuda);
  s.addKernel(PhaseId{1}, NodeId{50}, 100, 0, DeviceType::kCuda);
  EXPECT_EQ(dropped.value(), before + 2);
}

TEST_F(SessionTest, AddEventStoresMetricsWithTheEvent) {
  TraceEvent ev;
  ev.name = S("step");
  ev.beginNs = 10;
  ev.endNs = 20;
  ASSERT_TRUE(s.addEvent(PhaseId{0}, ev, {}).isOk());
  ASSERT_TRUE(s.addEvent(PhaseId{0}, ev, {M("n", int64_t{4})}).isOk());
  EXPECT_EQ(s.addEvent(PhaseId{0}, ev, {M("n", std::string("x"))}).code(), StatusCode::kMetricType);
  s.readPhase(PhaseId{0}, [](const PhaseData &p) {
    ASSERT_EQ(p.events().size(), 2u);
    EXPECT_EQ(p.events()[0].flexSlot, UINT32_MAX);
    const FlexMetrics &m = p.eventMetrics(p.events()[1].flexSlot);
    ASSERT_EQ(m.entries.size(), 1u);
    EXPECT_EQ(std::get<int64_t>(m.entries[0].value), 4);
  });
}

TEST_F(SessionTest, ReleaseDataLeavesATombstone) {
  uint64_t epoch = s.epoch();
  s.releaseData();
  EXPECT_TRUE(s.phaseIds().empty());
  EXPECT_GT(s.epoch(), epoch);
  EXPECT_EQ(s.child(PhaseId{0}, kRootNode, S("a")), kNoNode);
  EXPECT_FALSE(s.readPhase(PhaseId{0}, [](const PhaseData &) {}));
  EXPECT_TRUE(s.addMetrics(PhaseId{0}, kRootNode, {M("late", int64_t{1})}).isOk());
}

TEST_F(SessionTest, TakeCompletePhasesLeavesTheCurrentAndPendingPhases) {
  s.advancePhase();              // 1
  s.advancePhase();              // 2 (current)
  s.notePending(PhaseId{1}, 3);  // three kernels of phase 1 still on the device
  NodeId n = s.child(PhaseId{2}, kRootNode, S("kept"));
  std::vector<std::unique_ptr<PhaseData>> done = s.takeCompletePhases();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), PhaseId{0});
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{1}, PhaseId{2}}));
  s.notePending(PhaseId{1}, -3);
  done = s.takeCompletePhases();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), PhaseId{1});
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{2}}));
  EXPECT_EQ(s.child(PhaseId{2}, kRootNode, S("kept")), n);  // the current phase is untouched
  // A kernel of a taken phase arriving late is dropped and counted.
  Counter &late = Stats::global().counter("kernel_records_for_cleared_phase");
  uint64_t before = late.value();
  s.addKernel(PhaseId{1}, kRootNode, 100, 0, DeviceType::kCuda);
  EXPECT_EQ(late.value(), before + 1);
  // Put back (its file could not be written): in order again.
  s.restorePhase(std::move(done[0]));
  EXPECT_EQ(s.phaseIds(), (std::vector<PhaseId>{PhaseId{1}, PhaseId{2}}));
}

TEST_F(SessionTest, AbandonPendingCountsUndeliveredWorkOnce) {
  s.advancePhase();
  s.notePending(PhaseId{0}, 2);
  s.notePending(PhaseId{1}, 5);
  EXPECT_EQ(s.abandonPending(), 7);
  EXPECT_EQ(s.abandonPending(), 0);
  EXPECT_TRUE(s.isPhaseComplete(PhaseId{0}));
}

TEST_F(SessionTest, AbandonPendingBringsAnOversettledPhaseBackToZero) {
  // Launched and settled are counted apart (by the launching and the record thread): more
  // settled than launched is not abandoned work, and later launches count from zero again.
  s.notePending(PhaseId{0}, 1);
  s.notePending(PhaseId{0}, -3);
  EXPECT_EQ(s.pendingIn(PhaseId{0}), -2);
  EXPECT_EQ(s.abandonPending(), 0);
  EXPECT_EQ(s.pendingIn(PhaseId{0}), 0);
  s.notePending(PhaseId{0}, 1);
  EXPECT_EQ(s.pendingIn(PhaseId{0}), 1);
  EXPECT_EQ(s.abandonPending(), 1);
}

}  // namespace
}  // namespace proton
