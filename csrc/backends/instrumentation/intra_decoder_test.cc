#include "backends/instrumentation/intra_decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::instrumentation {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }

ScopeTable table(uint32_t hash, bool trace) {
  ScopeTable t;
  t.kernel = "mm_kernel";
  t.hash = hash;
  t.trace = trace;
  t.paths = {"", "load", "load\x1fwait"};
  t.numWarps = 2;
  t.unitWarps = 1;
  t.unitsPerCta = 2;
  t.capacity = 4;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * 4;
  return t;
}

template <typename T>
void put(std::vector<uint8_t> &buf, size_t at, T v) {
  std::memcpy(buf.data() + at, &v, sizeof(T));
}

const MetricValue *metric(Session &s, NodeId node, const std::string &name) {
  const MetricValue *out = nullptr;
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    const FlexMetrics *f = p.flex(node);
    const NamedMetric *m = f ? f->find(S(name)) : nullptr;
    out = m ? &m->value : nullptr;
  });
  return out;
}

uint64_t counter(const std::string &name) { return Stats::global().counter(name).value(); }

class IntraDecoderTest : public ::testing::Test {
 protected:
  Session tree{SessionId{7}, SessionOptions{}};
  NodeId kernel = tree.child(PhaseId{0}, kRootNode, S("mm_kernel"));
};

TEST_F(IntraDecoderTest, TreeSlotsAddTheirStripesUnderTheKernelNode) {
  ScopeTables tables;
  tables.add(table(0xabc, false));
  IntraDecoder decoder(tables);
  std::vector<uint8_t> slot(kTreeHeaderBytes + kTreeStripes * 3 * kTreeScopeBytes, 0);
  put<uint32_t>(slot, 0, 0xabc);
  // Stripe 0: kernel 1000 cycles over 2 warps; "load" 300 cycles, 4 runs by 2 warps.
  // Stripe 5: "load/wait" 90 cycles, 3 runs by 1 warp.
  size_t stripe = 3 * kTreeScopeBytes;
  put<uint64_t>(slot, 16, 1000);
  put<uint32_t>(slot, 16 + 12, 2);
  put<uint64_t>(slot, 32, 300);
  put<uint32_t>(slot, 32 + 8, 4);
  put<uint32_t>(slot, 32 + 12, 2);
  put<uint64_t>(slot, 16 + 5 * stripe + 32, 90);
  put<uint32_t>(slot, 16 + 5 * stripe + 32 + 8, 3);
  put<uint32_t>(slot, 16 + 5 * stripe + 32 + 12, 1);
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(slot.data(), slot.size(), IntraLaunch{&target, 1, 0, 0, 1.5});

  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 1000);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, kernel, "normalized_cycles")), 500.0);
  EXPECT_EQ(metric(tree, kernel, "count"), nullptr);  // the launch count is CUPTI's
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  NodeId wait = tree.child(PhaseId{0}, load, S("wait"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 4);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, load, "normalized_cycles")), 150.0);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, wait, "cycles")), 90);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, wait, "count")), 3);
}

TEST_F(IntraDecoderTest, TreeSlotWithUnknownTableIsCountedNotGuessed) {
  ScopeTables tables;
  IntraDecoder decoder(tables);
  std::vector<uint8_t> slot(1024, 0);
  put<uint32_t>(slot, 0, 0x1234);
  uint64_t before = counter("instrumentation_buffers_without_table");
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(slot.data(), slot.size(), IntraLaunch{&target, 1, 0, 0, 1.5});
  EXPECT_EQ(counter("instrumentation_buffers_without_table"), before + 1);
  EXPECT_EQ(metric(tree, kernel, "cycles"), nullptr);
}

// One trace unit: header then events [tag, clock32] in ring order.
void unit(std::vector<uint8_t> &buf, size_t at, uint32_t hash, uint32_t sm, uint64_t gt0,
          uint64_t c0, const std::vector<std::pair<uint32_t, uint32_t>> &events,
          uint32_t capacity) {
  put<uint32_t>(buf, at, static_cast<uint32_t>(events.size()));
  put<uint32_t>(buf, at + 4, sm);
  put<uint64_t>(buf, at + 8, gt0);
  put<uint64_t>(buf, at + 16, c0);
  put<uint64_t>(buf, at + 24, gt0 + 1000);  // 1000 ns for 2000 cycles: 2 cycles per ns
  put<uint64_t>(buf, at + 32, c0 + 2000);
  put<uint32_t>(buf, at + 40, hash);
  for (size_t j = 0; j < events.size(); ++j) {
    size_t e = at + kTraceUnitHeaderBytes + 8 * (j % capacity);
    put<uint32_t>(buf, e, events[j].first);
    put<uint32_t>(buf, e + 4, events[j].second);
  }
}

TEST_F(IntraDecoderTest, TraceUnitsBecomeWarpSlicesAlignedToTheKernelStart) {
  SessionOptions options;
  options.data = DataKind::kTrace;
  Session trace{SessionId{8}, options};
  NodeId node = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0xdef, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  // Warp 0 on SM 3: kernel [100, 1100), load [200, 600) with wait [300, 500) inside.
  unit(buf, 0, 0xdef, 3, 5000, 1000,
       {{0, 1100}, {2, 1200}, {4, 1300}, {5, 1500}, {3, 1600}, {1, 2100}}, 4);
  // Warp 1: its kernel scope only.
  unit(buf, t.unitBytes, 0xdef, 4, 5000, 1000, {{0, 1000}, {1, 3000}}, 4);
  uint64_t overwritten = counter("instrumentation_events_overwritten");
  uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  IntraTarget target{&trace, PhaseId{0}, node};
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{&target, 1, 2, 70000, 0});

  // Warp 0 wrote 6 events into 4 places: the kernel's and load's enters were overwritten,
  // so their exits are unmatched; wait, enter and exit both kept, is still a slice.
  EXPECT_EQ(counter("instrumentation_events_overwritten"), overwritten + 2);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched + 2);
  std::vector<TraceEvent> events;
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) { events = p.events(); });
  ASSERT_EQ(events.size(), 2u);
  const TraceEvent &wait = events.front();
  EXPECT_EQ(wait.name, S("wait"));
  EXPECT_EQ(wait.beginNs, 70150u);  // 300 cycles after the warp's start, shifted to 70000
  EXPECT_EQ(wait.endNs, 70250u);
  const TraceEvent &w1 = events.back();
  EXPECT_EQ(w1.lane.kind, Lane::Kind::kWarp);
  EXPECT_EQ(w1.lane.device, 2u);
  EXPECT_EQ(Lane::ctaOf(w1.lane.id), 0u);
  EXPECT_EQ(Lane::warpOf(w1.lane.id), 1u);
  EXPECT_EQ(w1.name, S("mm_kernel"));
  EXPECT_EQ(w1.beginNs, 70000u);  // the earliest warp start is the kernel's CUPTI start
  EXPECT_EQ(w1.endNs, 71000u);    // 2000 cycles at 2 cycles per ns
}

TEST_F(IntraDecoderTest, TraceScopesNestAndFeedTreeSessionsToo) {
  SessionOptions options;
  options.data = DataKind::kTrace;
  Session trace{SessionId{9}, options};
  NodeId traceKernel = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0x77, true);
  t.capacity = 8;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * 8;
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  unit(buf, 0, 0x77, 1, 9000, 0, {{0, 100}, {2, 200}, {4, 300}, {5, 500}, {3, 600}, {1, 1100}}, 8);
  IntraTarget targets[] = {{&trace, PhaseId{0}, traceKernel}, {&tree, PhaseId{0}, kernel}};
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{targets, 2, 0, 0, 0});

  std::vector<TraceEvent> events;
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) { events = p.events(); });
  ASSERT_EQ(events.size(), 3u);  // wait, load, kernel: in the order they closed
  EXPECT_EQ(events[0].name, S("wait"));
  EXPECT_EQ(events[0].endNs - events[0].beginNs, 100u);  // 200 cycles at 2 per ns
  EXPECT_EQ(events[1].context, trace.child(PhaseId{0}, traceKernel, S("load")));
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "cycles")), 400);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, tree.child(PhaseId{0}, load, S("wait")), "cycles")),
            200);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 1000);
}

}  // namespace
}  // namespace proton::instrumentation
