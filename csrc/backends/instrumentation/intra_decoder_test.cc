#include "backends/instrumentation/intra_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
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

template <typename T>
T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
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

// A tree slot of `records` records of `unitBytes`, its header written: [hash | unitBytes |
// launches that added into it].
std::vector<uint8_t> treeSlot(uint32_t hash, uint32_t unitBytes, size_t records,
                              uint32_t launches = 1) {
  std::vector<uint8_t> slot(kTreeHeaderBytes + records * unitBytes, 0);
  put<uint32_t>(slot, 0, hash);
  put<uint32_t>(slot, 4, unitBytes);
  put<uint32_t>(slot, 8, launches);
  return slot;
}

// One tree record: [unmatched | crossing | recorded | 0] then [cycles | count | ran] per scope.
// A unit's own record: recorded 1, ran 1 where it ran the scope (kRanIfCounted); a CTA's
// sums: the units summed and, per scope, the units that ran it.
constexpr uint32_t kRanIfCounted = UINT32_MAX;
struct ScopeSums {
  uint64_t cycles;
  uint32_t count;
  uint32_t ran = kRanIfCounted;
};
void treeRecord(std::vector<uint8_t> &slot, size_t at, uint32_t unmatched,
                const std::vector<ScopeSums> &scopes, uint32_t recorded = 1) {
  put<uint32_t>(slot, at, unmatched);
  put<uint32_t>(slot, at + 8, recorded);
  for (size_t i = 0; i < scopes.size(); ++i) {
    put<uint64_t>(slot, at + 16 + 16 * i, scopes[i].cycles);
    put<uint32_t>(slot, at + 24 + 16 * i, scopes[i].count);
    uint32_t ran = scopes[i].ran == kRanIfCounted ? (scopes[i].count ? 1 : 0) : scopes[i].ran;
    put<uint32_t>(slot, at + 28 + 16 * i, ran);
  }
}

// A launch's count of a scope may pass 2^32 (a long kernel, a scope in its inner loop, many
// CTAs): one record's cannot, their sum is kept in 64 bits (before, it wrapped: 1705032704
// for these two CTAs).
TEST_F(IntraDecoderTest, ALaunchsCountOfAScopeMayPassTwoToThe32) {
  ScopeTables tables;
  tables.add(table(0xabc, false));
  IntraDecoder decoder(tables);
  const uint32_t unitBytes = 64;
  std::vector<uint8_t> slot = treeSlot(0xabc, unitBytes, 2);
  treeRecord(slot, 16, 0, {{5'000'000'000, 8, 8}, {4'000'000'000, 3'000'000'000u, 8}, {0, 0}}, 8);
  treeRecord(slot, 16 + unitBytes, 0,
             {{5'000'000'000, 8, 8}, {4'000'000'000, 3'000'000'000u, 8}, {0, 0}}, 8);
  std::vector<uint8_t> reduced(kReducedTreeBytes);
  ASSERT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 6'000'000'000);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "cycles")), 8'000'000'000);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, load, "normalized_cycles")), 8e9 / 16);
}

TEST_F(IntraDecoderTest, TreeUnitRecordsAreSummedAndFiledUnderTheKernelNode) {
  ScopeTables tables;
  tables.add(table(0xabc, false));
  IntraDecoder decoder(tables);
  // Two CTAs of two units, 3 scopes (kernel, load, load/wait): unit bytes 16 + 3 * 16 = 64.
  const uint32_t unitBytes = 64;
  std::vector<uint8_t> slot = treeSlot(0xabc, unitBytes, 4);
  // Unit 0: kernel 600 cycles; "load" 200 cycles in 3 runs. Unit 1 did not record (not
  // selected): its stale words must not count. Unit 2: kernel 400; "load" 100 in 1 run;
  // "load/wait" 90 in 3 runs; one unmatched exit. Unit 3: kernel only, 0 cycles.
  treeRecord(slot, 16, 0, {{600, 1}, {200, 3}, {0, 0}});
  put<uint64_t>(slot, 16 + unitBytes + 16, 7777);  // stale, `recorded` is 0
  put<uint32_t>(slot, 16 + unitBytes + 24, 5);
  treeRecord(slot, 16 + 2 * unitBytes, 1, {{400, 1}, {100, 1}, {90, 3}});
  treeRecord(slot, 16 + 3 * unitBytes, 0, {{0, 1}, {0, 0}, {0, 0}});
  std::vector<uint8_t> reduced(kReducedTreeBytes);
  ASSERT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  EXPECT_EQ(load<uint32_t>(reduced.data() + 12), 1u);  // the launches the slot holds
  uint64_t unmatchedBefore = counter("instrumentation_unmatched_scopes");
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});

  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 1000);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, kernel, "normalized_cycles")), 1000.0 / 3);
  EXPECT_EQ(metric(tree, kernel, "count"), nullptr);  // the launch count is CUPTI's
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  NodeId wait = tree.child(PhaseId{0}, load, S("wait"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 4);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "cycles")), 300);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, load, "normalized_cycles")), 150.0);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, wait, "cycles")), 90);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, wait, "count")), 3);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatchedBefore + 1);
  // The cycle metrics are exclusive, as in triton.profiler: "load" holds "wait"'s 90 cycles
  // already, and a reader adding them into it would count them twice.
  std::vector<std::string> exclusive, property;
  tree.metricAggregations(exclusive, property);
  std::sort(exclusive.begin(), exclusive.end());
  EXPECT_EQ(exclusive, (std::vector<std::string>{"cycles", "normalized_cycles"}));
  EXPECT_TRUE(property.empty());
}

// A tree counts every execution of an unmatched exit (or crossing one) by a recording warp,
// from the warps' own counts, once: the table's count of such markers is for traces, which
// keep none. (Before, a tree added the table's count on top: one execution counted 2.)
TEST_F(IntraDecoderTest, ATreeCountsAnUnmatchedExitRunOnceOnce) {
  ScopeTable t = table(0xabd, false);
  t.staticUnmatched = 1;  // one `exit_scope` marker with no enter
  t.staticCrossing = 1;
  ScopeTables tables;
  tables.add(t);
  IntraDecoder decoder(tables);
  const uint32_t unitBytes = 64;
  std::vector<uint8_t> slot = treeSlot(0xabd, unitBytes, 1);
  treeRecord(slot, 16, /*unmatched=*/1, {{500, 1}, {0, 0}, {0, 0}});
  put<uint32_t>(slot, 16 + 4, 2);  // crossing exits run: 2
  std::vector<uint8_t> reduced(kReducedTreeBytes);
  ASSERT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  const uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  const uint64_t crossing = counter("instrumentation_crossing_scopes");
  IntraTarget target{&tree, PhaseId{0}, kernel};
  testing::internal::CaptureStderr();  // the warning naming the kernel
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched + 1);
  EXPECT_EQ(counter("instrumentation_crossing_scopes"), crossing + 2);
}

TEST_F(IntraDecoderTest, CtaSumRecordsCountTheirUnitsAndTheUnitsThatRanEachScope) {
  ScopeTables tables;
  tables.add(table(0xabd, false));
  IntraDecoder decoder(tables);
  // One record per CTA (CTA sums): CTA 0 holds 2 units (kernel 1000 cycles; "load" 300 in 4
  // runs by both; "load/wait" 90 in 3 runs by one), CTA 1 one unit, which ran only the kernel.
  const uint32_t unitBytes = 64;
  std::vector<uint8_t> slot = treeSlot(0xabd, unitBytes, 2);
  treeRecord(slot, 16, 0, {{1000, 2, 2}, {300, 4, 2}, {90, 3, 1}}, 2);
  treeRecord(slot, 16 + unitBytes, 0, {{500, 1, 1}, {0, 0, 0}, {0, 0, 0}}, 1);
  std::vector<uint8_t> reduced(kReducedTreeBytes);
  ASSERT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  EXPECT_EQ(load<uint32_t>(reduced.data() + 12), 1u);       // one launch
  EXPECT_EQ(load<uint32_t>(reduced.data() + 16 + 16), 3u);  // the kernel scope: 3 units
  EXPECT_EQ(load<uint32_t>(reduced.data() + 40 + 16), 2u);  // "load": 2 units
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 1500);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, kernel, "normalized_cycles")), 500.0);
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 4);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, load, "normalized_cycles")), 150.0);
  NodeId wait = tree.child(PhaseId{0}, load, S("wait"));
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, wait, "normalized_cycles")), 90.0);
}

TEST_F(IntraDecoderTest, ASlotThatAGraphsReplaysAddedIntoFilesTheirSumsPerLaunch) {
  ScopeTables tables;
  tables.add(table(0xabe, false));
  IntraDecoder decoder(tables);
  // A launch captured into a CUDA graph, replayed 3 times: each replay added its CTA sums into
  // the same records (2 CTAs of 2 units: 4 warps per replay), and its launch into the header.
  const uint32_t unitBytes = 64;
  std::vector<uint8_t> slot = treeSlot(0xabe, unitBytes, 2, 3);
  treeRecord(slot, 16, 0, {{3000, 6, 6}, {900, 12, 6}, {0, 0, 0}}, 6);
  treeRecord(slot, 16 + unitBytes, 0, {{1800, 6, 6}, {300, 6, 6}, {0, 0, 0}}, 6);
  std::vector<uint8_t> reduced(kReducedTreeBytes);
  ASSERT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  EXPECT_EQ(load<uint32_t>(reduced.data() + 12), 3u);
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  // cycles and counts are the replays' sums; normalized_cycles is per warp and launch, summed
  // over the 3 launches, as 3 launches filed one by one would give.
  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 4800);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, kernel, "normalized_cycles")), 3 * 4800.0 / 12);
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 18);
  EXPECT_DOUBLE_EQ(std::get<double>(*metric(tree, load, "normalized_cycles")), 3 * 1200.0 / 12);
}

TEST_F(IntraDecoderTest, TreeSlotThatNoUnitWroteFilesNothing) {
  ScopeTables tables;
  tables.add(table(0xabc, false));
  IntraDecoder decoder(tables);
  std::vector<uint8_t> slot(kTreeHeaderBytes + 2 * 64, 0);
  std::vector<uint8_t> reduced(kReducedTreeBytes, 0xff);
  EXPECT_TRUE(reduceTreeSlot(slot.data(), slot.size(), reduced.data()));
  EXPECT_EQ(load<uint32_t>(reduced.data()), 0u);
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  EXPECT_EQ(metric(tree, kernel, "cycles"), nullptr);
}

TEST_F(IntraDecoderTest, MarkersTheRewriteDroppedAreCountedPerLaunchAndNamedOnce) {
  ScopeTables tables;
  ScopeTable t = table(0xd0d, false);
  t.droppedMarkers = 4;
  t.droppedScopes = {"inner", "deep"};
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> reduced(kReducedTreeBytes, 0);
  put<uint32_t>(reduced, 0, 0xd0d);
  put<uint64_t>(reduced, kTreeHeaderBytes, 500);  // the kernel scope: 500 cycles, one warp
  put<uint32_t>(reduced, kTreeHeaderBytes + 16, 1);
  uint64_t before = counter("instrumentation_markers_not_recorded");
  uint64_t perKernel = counter("instrumentation_markers_not_recorded[mm_kernel]");
  IntraTarget target{&tree, PhaseId{0}, kernel};
  testing::internal::CaptureStderr();
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_markers_not_recorded"), before + 8);
  EXPECT_EQ(counter("instrumentation_markers_not_recorded[mm_kernel]"), perKernel + 8);
  EXPECT_EQ(err,
            "[PROTON] kernel mm_kernel: 4 scope markers of scopes inner, deep are not "
            "recorded: a kernel records scopes in its own body only, not in a function the "
            "compiler did not inline (noinline=True), and at most 63 of them (stats: "
            "instrumentation_markers_not_recorded).\n");
  // What was recorded is filed as usual.
  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 1000);
}

TEST_F(IntraDecoderTest, TreeSlotWithUnknownTableIsCountedNotGuessed) {
  ScopeTables tables;
  IntraDecoder decoder(tables);
  std::vector<uint8_t> reduced(kReducedTreeBytes, 0);
  put<uint32_t>(reduced, 0, 0x1234);
  uint64_t before = counter("instrumentation_buffers_without_table");
  IntraTarget target{&tree, PhaseId{0}, kernel};
  decoder.fileTree(reduced.data(), IntraLaunch{&target, 1, 0, 0, 1.5});
  EXPECT_EQ(counter("instrumentation_buffers_without_table"), before + 1);
  EXPECT_EQ(metric(tree, kernel, "cycles"), nullptr);
}

SessionOptions traceData() {
  SessionOptions options;
  options.data = DataKind::kTrace;
  return options;
}

std::vector<TraceEvent> eventsOf(Session &s) {
  std::vector<TraceEvent> events;
  s.readPhase(PhaseId{0},
              [&](const PhaseData &p) { events.assign(p.events().begin(), p.events().end()); });
  return events;
}

// The slices that one launch's trace buffer files into a trace session of its own.
std::vector<TraceEvent> traceOf(IntraDecoder &decoder, const std::vector<uint8_t> &buf,
                                uint32_t unitBytes, uint64_t kernelStartNs = 0,
                                double cyclesPerNs = 0) {
  Session s{SessionId{99}, traceData()};
  IntraTarget target{&s, PhaseId{0}, s.child(PhaseId{0}, kRootNode, S("mm_kernel"))};
  decoder.fileTrace(buf.data(), buf.size(), unitBytes,
                    IntraLaunch{&target, 1, 0, kernelStartNs, cyclesPerNs});
  return eventsOf(s);
}

// One trace unit: header then events [tag, clock32] in ring order; the unit started at
// (gt0 ns, c0 cycles) and returned 2000 cycles and 1000 ns later (its kernel scope). The
// CTA's part of the header (SM, globaltimer readings) only where ctaPart: the CTA's first
// recording unit.
void unit(std::vector<uint8_t> &buf, size_t at, uint32_t hash, uint32_t sm, uint64_t gt0,
          uint64_t c0, const std::vector<std::pair<uint32_t, uint32_t>> &events, uint32_t capacity,
          bool ctaPart = true) {
  if (ctaPart) {
    put<uint32_t>(buf, at, sm);
    put<uint64_t>(buf, at + 8, gt0);
    put<uint64_t>(buf, at + 16, gt0 + 1000);  // 1000 ns for 2000 cycles: 2 cycles per ns
    put<uint32_t>(buf, at + 24, hash);
  }
  put<uint32_t>(buf, at + 32, static_cast<uint32_t>(events.size()) | kTraceUnitReturned);
  put<uint32_t>(buf, at + 36, static_cast<uint32_t>(c0 + 2000));  // low 32 bits
  put<uint64_t>(buf, at + 40, c0);
  for (size_t j = 0; j < events.size(); ++j) {
    size_t e = at + kTraceUnitHeaderBytes + 8 * (j % capacity);
    put<uint32_t>(buf, e, events[j].first);
    put<uint32_t>(buf, e + 4, events[j].second);
  }
}

// A crossing exit (`exit_scope("load")` with "wait" still open inside it) run once by one warp
// is one crossing pair in a trace as in a tree: its events show it, so the table's count of
// such markers is not added on top. (Before, a trace counted it twice.) An unmatched exit has
// no event in a trace: the table's count stands for it, once per launch.
TEST_F(IntraDecoderTest, ATraceCountsACrossingExitRunOnceOnce) {
  ScopeTable t = table(0xdf0, true);
  t.staticCrossing = 1;
  t.staticUnmatched = 1;
  ScopeTables tables;
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  unit(buf, 0, 0xdf0, 3, 5000, 1000, {{2, 1100}, {4, 1200}, {3, 1300}}, 4);
  unit(buf, t.unitBytes, 0xdf0, 0, 0, 1000, {}, 4, /*ctaPart=*/false);
  const uint64_t crossing = counter("instrumentation_crossing_scopes");
  const uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  testing::internal::CaptureStderr();
  traceOf(decoder, buf, t.unitBytes, 70000);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_crossing_scopes"), crossing + 1);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched + 1);
}

// An event started in one warp and ended in another (Gluon's warp_specialize: a producer
// partition starts it, a consumer ends it): within the CTA, starts and ends of the event are
// each ordered by (warp, time) and the k-th start is linked to the k-th end, as two slices of
// zero length sharing a link. A start left without an end is an unmatched scope, as before.
TEST_F(IntraDecoderTest, AnEventStartedInOneWarpAndEndedInAnotherIsALinkedPair) {
  ScopeTable t = table(0xe7e, true);
  t.paths = {"", "ws"};
  t.eventScopes = 0b10;  // scope 1 is an event
  t.numWarps = 8;
  t.unitsPerCta = 8;
  ScopeTables tables;
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(8 * t.unitBytes, 0);
  // Warps 0-3 end the event (exit tag 3) at cycles 1500 + 10 w; warps 4-7 start it (enter
  // tag 2) at 1100 + 10 w, and warp 7 starts it a second time, never ended.
  for (uint32_t w = 0; w < 8; ++w) {
    std::vector<std::pair<uint32_t, uint32_t>> events;
    if (w < 4) events = {{3, 1500 + 10 * w}};
    if (w >= 4) events = {{2, 1100 + 10 * w}};
    if (w == 7) events.push_back({2, 1300});
    unit(buf, w * t.unitBytes, 0xe7e, 5, 5000, 1000, events, 4, /*ctaPart=*/w == 0);
  }
  const uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  testing::internal::CaptureStderr();
  std::vector<TraceEvent> events = traceOf(decoder, buf, t.unitBytes, 70000);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched + 1);  // warp 7's second
  std::map<uint64_t, std::vector<const TraceEvent *>> links;
  for (const TraceEvent &e : events)
    if (e.link) links[e.link].push_back(&e);
  ASSERT_EQ(links.size(), 4u);
  std::set<uint32_t> startWarps, endWarps;
  for (const auto &[link, ends] : links) {
    ASSERT_EQ(ends.size(), 2u);
    const TraceEvent *start = ends[0]->linkEnd ? ends[1] : ends[0];
    const TraceEvent *end = ends[0]->linkEnd ? ends[0] : ends[1];
    ASSERT_TRUE(end->linkEnd && !start->linkEnd);
    uint32_t from = Lane::warpOf(start->lane.id), to = Lane::warpOf(end->lane.id);
    EXPECT_EQ(from, to + 4);  // the k-th start with the k-th end
    EXPECT_EQ(start->name, S("ws"));
    EXPECT_EQ(start->beginNs, start->endNs);  // zero length
    EXPECT_EQ(end->beginNs, end->endNs);
    EXPECT_EQ(start->beginNs, 70000u + (100 + 10 * from) / 2);  // 2 cycles per ns
    EXPECT_EQ(end->beginNs, 70000u + (500 + 10 * to) / 2);
    EXPECT_LT(start->beginNs, end->beginNs);
    startWarps.insert(from);
    endWarps.insert(to);
  }
  EXPECT_EQ(startWarps, (std::set<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(endWarps, (std::set<uint32_t>{0, 1, 2, 3}));
  // Warp 7's second start is no slice; the other slices are the warps' kernel scopes.
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [&](const TraceEvent &e) { return e.name == S("ws"); }),
            8);
  // Another launch's links are new ones: a bind_id is unique in the file.
  testing::internal::CaptureStderr();
  std::vector<TraceEvent> again = traceOf(decoder, buf, t.unitBytes, 90000);
  testing::internal::GetCapturedStderr();
  std::set<uint64_t> againLinks;
  for (const TraceEvent &e : again)
    if (e.link) {
      EXPECT_EQ(links.count(e.link), 0u);
      againLinks.insert(e.link);
    }
  EXPECT_EQ(againLinks.size(), 4u);
}

TEST_F(IntraDecoderTest, TraceUnitsBecomeWarpSlicesAlignedToTheKernelStart) {
  Session trace{SessionId{8}, traceData()};
  NodeId node = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0xdef, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  // Warp 0 on SM 3, its kernel scope [0, 2000) cycles from its header: 6 events into 4
  // places. Lost: load's enter and wait's enter; kept: wait's and load's exits (their enters
  // were written over), then a whole wait [500, 700).
  unit(buf, 0, 0xdef, 3, 5000, 1000,
       {{2, 1100}, {4, 1200}, {5, 1300}, {3, 1400}, {4, 1500}, {5, 1700}}, 4);
  // Warp 1: its kernel scope only (a trace has no events of its own for it); its SM and
  // globaltimer are its CTA's, from warp 0.
  unit(buf, t.unitBytes, 0xdef, 0, 0, 1000, {}, 4, /*ctaPart=*/false);
  uint64_t overwritten = counter("instrumentation_events_overwritten");
  uint64_t ofKernel = counter("instrumentation_events_overwritten[mm_kernel]");
  uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  IntraTarget target{&trace, PhaseId{0}, node};
  testing::internal::CaptureStderr();
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{&target, 1, 2, 70000, 0});
  std::string warning = testing::internal::GetCapturedStderr();

  // The exits whose enters were written over are the overflow's loss, not unmatched scopes;
  // wait, enter and exit both kept, is still a slice. One warning names the kernel and says
  // what to change.
  EXPECT_EQ(counter("instrumentation_events_overwritten"), overwritten + 2);
  EXPECT_EQ(counter("instrumentation_events_overwritten[mm_kernel]"), ofKernel + 2);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched);
  EXPECT_NE(warning.find("[PROTON] kernel mm_kernel (scopes: load, wait): 2 trace events were "
                         "written over in full buffers of 4 events per recording unit (a "
                         "larger mode buffer_size keeps them"),
            std::string::npos)
      << warning;
  EXPECT_EQ(warning.find("no matching enter"), std::string::npos) << warning;
  std::vector<TraceEvent> events = eventsOf(trace);
  ASSERT_EQ(events.size(), 3u);  // warp 0's wait and kernel scope, warp 1's kernel scope
  const TraceEvent &wait = events.front();
  EXPECT_EQ(wait.name, S("wait"));
  EXPECT_EQ(wait.beginNs, 70250u);  // 500 cycles after the warp's start, shifted to 70000
  EXPECT_EQ(wait.endNs, 70350u);
  EXPECT_EQ(wait.sm, 3u);
  EXPECT_EQ(wait.cycles, 200u);
  for (size_t w = 1; w < 3; ++w) {
    const TraceEvent &k = events[w];
    EXPECT_EQ(k.name, S("mm_kernel"));
    EXPECT_EQ(k.lane.kind, Lane::Kind::kWarp);
    EXPECT_EQ(k.lane.device, 2u);
    EXPECT_EQ(Lane::ctaOf(k.lane.id), 0u);
    EXPECT_EQ(Lane::warpOf(k.lane.id), w - 1);
    EXPECT_EQ(k.beginNs, 70000u);  // the earliest warp start is the kernel's CUPTI start
    EXPECT_EQ(k.endNs, 71000u);    // 2000 cycles at 2 cycles per ns
  }
}

// A launch without a kernel record of its own (a CUDA graph replay) is placed by its
// %globaltimer readings moved by the offset the device's last launch with a record had, so
// that its slices land inside its kernel's slice; with none known yet, the GPU's clock stays.
TEST_F(IntraDecoderTest, TraceLaunchesWithoutARecordTakeTheDevicesKnownOffset) {
  ScopeTables tables;
  ScopeTable t = table(0x9a1, true);
  tables.add(t);
  auto oneUnit = [&](uint64_t gt0) {
    std::vector<uint8_t> buf(t.unitBytes, 0);
    unit(buf, 0, 0x9a1, 1, gt0, 1000, {}, 4);
    return buf;
  };
  IntraDecoder fresh(tables);
  std::vector<TraceEvent> unaligned = traceOf(fresh, oneUnit(9000), t.unitBytes);
  ASSERT_EQ(unaligned.size(), 1u);
  EXPECT_EQ(unaligned[0].beginNs, 9000u);  // nothing known: the GPU's clock
  IntraDecoder decoder(tables);
  std::vector<TraceEvent> recorded = traceOf(decoder, oneUnit(5000), t.unitBytes, 70000);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].beginNs, 70000u);
  std::vector<TraceEvent> replay = traceOf(decoder, oneUnit(9000), t.unitBytes);
  ASSERT_EQ(replay.size(), 1u);
  EXPECT_EQ(replay[0].beginNs, 74000u);  // 4000 ns after the recorded launch's start
  EXPECT_EQ(replay[0].endNs, 75000u);
}

// A drain reads back only the event places the units wrote (a short stride): the slices are
// those of the whole slot; a unit that wrote more places than were read back keeps none.
TEST_F(IntraDecoderTest, SlotsReadBackWithAShortStrideGiveTheSameSlices) {
  ScopeTables tables;
  ScopeTable t = table(0x5a7, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> whole(2 * t.unitBytes, 0);
  unit(whole, 0, 0x5a7, 3, 5000, 1000, {{2, 1100}, {3, 1300}}, 4);
  unit(whole, t.unitBytes, 0x5a7, 0, 0, 1000, {{2, 1200}}, 4, /*ctaPart=*/false);
  const uint32_t stride = kTraceUnitHeaderBytes + 8 * 2;
  std::vector<uint8_t> shortStride(2 * stride);
  for (size_t u = 0; u < 2; ++u)
    std::memcpy(shortStride.data() + u * stride, whole.data() + u * t.unitBytes, stride);
  std::vector<TraceEvent> expected = traceOf(decoder, whole, t.unitBytes, 70000);
  ASSERT_EQ(expected.size(), 3u);  // load, and the two kernel scopes
  Session s{SessionId{98}, traceData()};
  IntraTarget target{&s, PhaseId{0}, s.child(PhaseId{0}, kRootNode, S("mm_kernel"))};
  TraceSlotView view{shortStride.data(), shortStride.size(), t.unitBytes, stride};
  testing::internal::CaptureStderr();  // unit 1's open load is unmatched, as in the whole slot
  decoder.fileTrace(view, IntraLaunch{&target, 1, 0, 70000, 0});
  testing::internal::GetCapturedStderr();
  std::vector<TraceEvent> got = eventsOf(s);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, expected[i].name) << i;
    EXPECT_EQ(got[i].beginNs, expected[i].beginNs) << i;
    EXPECT_EQ(got[i].endNs, expected[i].endNs) << i;
    EXPECT_EQ(got[i].lane.id, expected[i].lane.id) << i;
  }
  EXPECT_EQ(decoder.countTraceSlices(view), 3u);
  // One place read back, two written by unit 0: its events are lost, counted, not misread.
  TraceSlotView tooShort{shortStride.data(), shortStride.size(), t.unitBytes,
                         kTraceUnitHeaderBytes + 8};
  std::vector<uint8_t> oneEach(2 * tooShort.stride);
  for (size_t u = 0; u < 2; ++u)
    std::memcpy(oneEach.data() + u * tooShort.stride, whole.data() + u * t.unitBytes,
                tooShort.stride);
  tooShort.data = oneEach.data();
  tooShort.size = oneEach.size();
  // Each unit's kernel scope only: unit 0's load was not read back, and is not guessed.
  EXPECT_EQ(decoder.countTraceSlices(tooShort), 2u);
}

// A wrapped unit excuses as many exits without an enter as events were lost, no more; and a
// kind of loss seen first in a later launch of a kernel gets its own warning.
TEST_F(IntraDecoderTest, WrappedUnitsExcuseOnlyAsManyExitsAsEventsWereLost) {
  Session trace{SessionId{10}, traceData()};
  NodeId node = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0xabc, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  IntraTarget target{&trace, PhaseId{0}, node};
  std::vector<uint8_t> buf(t.unitBytes, 0);
  // 5 events into 4 places: wait's enter is lost. Kept: load's enter and exit, a second exit
  // of load (a real mismatch) and wait's exit: two exits without an enter, one lost.
  unit(buf, 0, 0xabc, 0, 5000, 1000, {{4, 1100}, {2, 1200}, {3, 1300}, {3, 1400}, {5, 1500}}, 4);
  uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  uint64_t overwritten = counter("instrumentation_events_overwritten");
  testing::internal::CaptureStderr();
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{&target, 1, 0, 0, 0});
  std::string first = testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_events_overwritten"), overwritten + 1);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched + 1);
  EXPECT_NE(first.find("1 trace events were written over"), std::string::npos) << first;
  EXPECT_NE(first.find("1 scope exits had no matching enter"), std::string::npos) << first;
  // The same losses again: nothing new to tell. A crossing pair, new for this kernel: told.
  testing::internal::CaptureStderr();
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{&target, 1, 0, 0, 0});
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  t.capacity = 8;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * 8;
  t.hash = 0xabd;
  tables.add(t);
  std::vector<uint8_t> crossing(t.unitBytes, 0);
  // load enter, wait enter, load exit (closes wait).
  unit(crossing, 0, 0xabd, 0, 5000, 1000, {{2, 1200}, {4, 1250}, {3, 1300}}, 8);
  testing::internal::CaptureStderr();
  decoder.fileTrace(crossing.data(), crossing.size(), t.unitBytes,
                    IntraLaunch{&target, 1, 0, 0, 0});
  std::string later = testing::internal::GetCapturedStderr();
  EXPECT_NE(later.find("1 scopes were closed by an enclosing exit"), std::string::npos) << later;
  EXPECT_EQ(later.find("written over"), std::string::npos) << later;
}

// A unit other than its CTA's first stores no SM or globaltimer reading: it is placed on the
// GPU's clock by its CTA's first recording unit's (the SM clock is the CTA's), whichever unit
// that is (selective sampling may leave unit 0 out).
TEST_F(IntraDecoderTest, TraceUnitsArePlacedByTheirCtasFirstRecordingUnit) {
  Session trace{SessionId{11}, traceData()};
  NodeId node = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0x515, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  // Two CTAs of two units. CTA 0: unit 0 on SM 7 at (5000 ns, 1000 cycles), unit 1 started
  // 400 cycles later. CTA 1: unit 0 did not record; unit 1 stored the CTA's part (SM 9,
  // started 3000 ns and 90000 cycles: another SM's clock).
  std::vector<uint8_t> buf(4 * t.unitBytes, 0);
  unit(buf, 0, 0x515, 7, 5000, 1000, {}, 4);
  unit(buf, t.unitBytes, 0x515, 0, 0, 1400, {}, 4, /*ctaPart=*/false);
  unit(buf, 3 * t.unitBytes, 0x515, 9, 8000, 90000, {}, 4);
  // And a launch whose earliest unit is not its CTA's first recording unit: unit 1 started
  // 100 cycles (50 ns) before unit 0. The earliest start is the kernel's start.
  std::vector<uint8_t> early(2 * t.unitBytes, 0);
  unit(early, 0, 0x515, 7, 5000, 1000, {}, 4);
  unit(early, t.unitBytes, 0x515, 0, 0, 900, {}, 4, /*ctaPart=*/false);
  uint64_t without = counter("instrumentation_trace_units_without_cta_time");
  IntraTarget target{&trace, PhaseId{0}, node};
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{&target, 1, 0, 10000, 0});
  std::vector<TraceEvent> events = eventsOf(trace);
  std::vector<uint32_t> sms;  // the SM of every slice is its CTA's
  for (const TraceEvent &e : events) sms.push_back(e.sm);
  EXPECT_EQ(sms, (std::vector<uint32_t>{7, 7, 9}));
  ASSERT_EQ(events.size(), 3u);
  // Shifted so that the earliest start (5000 ns) is the kernel's CUPTI start, 10000 ns.
  EXPECT_EQ(events[0].beginNs, 10000u);
  EXPECT_EQ(events[1].beginNs, 10200u);  // 400 cycles at 2 per ns after its CTA's reading
  EXPECT_EQ(events[1].endNs, 11200u);
  EXPECT_EQ(Lane::ctaOf(events[2].lane.id), 1u);
  EXPECT_EQ(Lane::warpOf(events[2].lane.id), 1u);
  EXPECT_EQ(events[2].beginNs, 13000u);
  EXPECT_EQ(counter("instrumentation_trace_units_without_cta_time"), without);
  EXPECT_EQ(decoder.countTraceSlices(buf.data(), buf.size(), t.unitBytes), 3u);
  // Counted in parts of whole CTAs (on as many threads), the parts add up to the whole: a
  // CTA's units are counted with its first recording unit, whatever the split.
  for (size_t parts : {2u, 3u, 5u}) {
    uint64_t sum = 0;
    for (size_t part = 0; part < parts; ++part)
      sum += decoder.countTraceSlices(buf.data(), buf.size(), t.unitBytes, part, parts);
    EXPECT_EQ(sum, 3u) << parts;
  }

  events = traceOf(decoder, early, t.unitBytes, 10000);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].beginNs, 10050u);  // unit 0
  EXPECT_EQ(events[1].beginNs, 10000u);  // unit 1, the earliest
}

// Two markers with no instruction between them are one event (kPairedEventTag): both take
// its clock reading, in order. A lost paired event may have held two enters.
TEST_F(IntraDecoderTest, PairedEventsHoldTwoMarkersAndExcuseTwoExitsWhenLost) {
  Session trace{SessionId{13}, traceData()};
  NodeId node = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0x9a1, true);
  t.pairedEvents = 2;
  tables.add(t);
  IntraDecoder decoder(tables);
  auto pair = [](uint32_t first, uint32_t second) { return kPairedEventTag | first << 8 | second; };
  // 5 events into 4 places: the first, enters of load and wait, is written over; then wait's
  // and load's exits (excused: their enters were in it), then load and wait entered and left
  // together (one event each), [1400, 1600).
  std::vector<uint8_t> buf(t.unitBytes, 0);
  unit(buf, 0, 0x9a1, 0, 5000, 1000,
       {{pair(2, 4), 1100}, {5, 1200}, {3, 1300}, {pair(2, 4), 1400}, {pair(5, 3), 1600}}, 4);
  uint64_t unmatched = counter("instrumentation_unmatched_scopes");
  uint64_t overwritten = counter("instrumentation_events_overwritten");
  IntraTarget targets[] = {{&trace, PhaseId{0}, node}, {&tree, PhaseId{0}, kernel}};
  testing::internal::CaptureStderr();
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{targets, 2, 0, 0, 0});
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(counter("instrumentation_events_overwritten"), overwritten + 1);
  EXPECT_EQ(counter("instrumentation_unmatched_scopes"), unmatched);
  std::vector<TraceEvent> events = eventsOf(trace);
  ASSERT_EQ(events.size(), 3u);  // wait, load, kernel
  // A drain counts a slot's slices before it is filed (on another thread): the same three,
  // and no loss counted a second time.
  EXPECT_EQ(decoder.countTraceSlices(buf.data(), buf.size(), t.unitBytes), 3u);
  EXPECT_EQ(counter("instrumentation_events_overwritten"), overwritten + 1);
  EXPECT_EQ(events[0].name, S("wait"));
  EXPECT_EQ(events[1].name, S("load"));
  EXPECT_EQ(events[0].endNs - events[0].beginNs, 100u);  // 200 cycles at 2 per ns
  EXPECT_EQ(events[1].beginNs, events[0].beginNs);
  EXPECT_EQ(events[1].endNs, events[0].endNs);
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "cycles")), 200);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "count")), 1);
}

// Real globaltimer readings are ~2^60 ns, where a double steps by 256 ns: slices are placed
// to the ns (before, a warp's first slice landed up to 128 ns off the kernel's start).
TEST_F(IntraDecoderTest, SlicesArePlacedToTheNanosecondAtRealGlobaltimerReadings) {
  ScopeTables tables;
  ScopeTable t = table(0x6e5, true);
  tables.add(t);
  const uint64_t gt0 = 1795533033480904963ull;  // not a multiple of 256
  std::vector<uint8_t> buf(t.unitBytes, 0);
  unit(buf, 0, 0x6e5, 0, gt0, 1000, {{2, 1100}, {3, 1300}}, 4);  // load [+50 ns, +150 ns)
  for (uint64_t kernelStart : {uint64_t{50919626681}, uint64_t{0}}) {
    IntraDecoder decoder(tables);  // fresh: no device offset known for the launch without one
    std::vector<TraceEvent> events = traceOf(decoder, buf, t.unitBytes, kernelStart);
    ASSERT_EQ(events.size(), 2u);
    const uint64_t start = kernelStart ? kernelStart : gt0;  // the GPU's clock without a record
    EXPECT_EQ(events[0].beginNs, start + 50);
    EXPECT_EQ(events[0].endNs, start + 150);
    EXPECT_EQ(events[1].beginNs, start);  // the kernel scope
    EXPECT_EQ(events[1].endNs, start + 1000);
  }
}

// A unit that started but never returned (events in global memory, a warp that left
// through a predicated return) stored its start only: it is not a unit of the timeline, and
// its CTA's part, stored at the start, still places the others.
TEST_F(IntraDecoderTest, AUnitThatNeverReturnedIsLeftOut) {
  ScopeTables tables;
  ScopeTable t = table(0x3e7, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  unit(buf, 0, 0x3e7, 5, 5000, 1000, {}, 4);
  put<uint32_t>(buf, 32, 0);  // unit 0: started, never returned
  unit(buf, t.unitBytes, 0x3e7, 0, 0, 1200, {{2, 1300}, {3, 1500}}, 4, /*ctaPart=*/false);
  // No unit with the CTA's readings returned: the SM clock is the device's (2 per ns).
  std::vector<TraceEvent> events = traceOf(decoder, buf, t.unitBytes, 9000, 2.0);
  ASSERT_EQ(events.size(), 2u);  // unit 1's load and kernel scope
  EXPECT_EQ(Lane::warpOf(events[1].lane.id), 1u);
  EXPECT_EQ(events[1].beginNs, 9000u);  // the earliest unit that returned starts the kernel
  EXPECT_EQ(events[0].beginNs, 9050u);
}

// A trace slot whose units are laid out otherwise than its table says (another buffer_size)
// is counted, not walked past its units' ends.
TEST_F(IntraDecoderTest, TraceUnitsOfAnotherLayoutAreCountedNotWalked) {
  ScopeTables tables;
  ScopeTable t = table(0x1a7, true);  // 4 events per unit
  t.capacity = 256;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * 256;
  tables.add(t);
  IntraDecoder decoder(tables);
  const uint32_t stride = kTraceUnitHeaderBytes + 8 * 4;  // the buffer's units: 4 events
  std::vector<uint8_t> buf(2 * stride, 0);
  unit(buf, 0, 0x1a7, 0, 5000, 1000, {{2, 1100}, {3, 1200}}, 4);
  uint64_t before = counter("instrumentation_buffers_of_another_layout");
  EXPECT_EQ(traceOf(decoder, buf, stride).size(), 0u);
  EXPECT_EQ(counter("instrumentation_buffers_of_another_layout"), before + 1);
}

// The slice cap is a trace's: filed slices past it are counted, and a new recording starts
// with the whole cap again (before, the count never went back, and a process's later trace
// sessions recorded nothing once one had reached the cap).
TEST_F(IntraDecoderTest, TheSliceCapIsEachRecordingsOwn) {
  ScopeTables tables;
  ScopeTable t = table(0xca9, true);
  tables.add(t);
  IntraDecoder decoder(tables);
  decoder.setMaxTraceEvents(2);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  unit(buf, 0, 0xca9, 0, 5000, 1000, {{2, 1100}, {3, 1200}}, 4);  // load and the kernel scope
  unit(buf, t.unitBytes, 0xca9, 0, 0, 1000, {}, 4, /*ctaPart=*/false);
  uint64_t capped = counter("instrumentation_trace_events_capped");
  auto file = [&] { return traceOf(decoder, buf, t.unitBytes).size(); };
  EXPECT_EQ(file(), 2u);
  EXPECT_EQ(counter("instrumentation_trace_events_capped"), capped + 1);
  EXPECT_TRUE(decoder.traceFull());
  // The same recording, still full: a launch drained now is not walked, and counted.
  uint64_t past = counter("instrumentation_launches_past_trace_cap");
  EXPECT_EQ(file(), 0u);
  EXPECT_EQ(counter("instrumentation_launches_past_trace_cap"), past + 1);
  EXPECT_EQ(counter("instrumentation_trace_events_capped"), capped + 1);
  decoder.startAnew();
  EXPECT_FALSE(decoder.traceFull());
  EXPECT_EQ(file(), 2u);
}

TEST_F(IntraDecoderTest, TraceScopesNestAndFeedTreeSessionsToo) {
  Session trace{SessionId{9}, traceData()};
  NodeId traceKernel = trace.child(PhaseId{0}, kRootNode, S("mm_kernel"));
  ScopeTables tables;
  ScopeTable t = table(0x77, true);
  t.capacity = 8;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * 8;
  tables.add(t);
  IntraDecoder decoder(tables);
  std::vector<uint8_t> buf(2 * t.unitBytes, 0);
  unit(buf, 0, 0x77, 1, 9000, 0, {{2, 200}, {4, 300}, {5, 500}, {3, 600}}, 8);
  IntraTarget targets[] = {{&trace, PhaseId{0}, traceKernel}, {&tree, PhaseId{0}, kernel}};
  decoder.fileTrace(buf.data(), buf.size(), t.unitBytes, IntraLaunch{targets, 2, 0, 0, 0});

  std::vector<TraceEvent> events = eventsOf(trace);
  ASSERT_EQ(events.size(), 3u);  // wait, load, kernel: in the order they closed
  EXPECT_EQ(events[0].name, S("wait"));
  EXPECT_EQ(events[0].endNs - events[0].beginNs, 100u);  // 200 cycles at 2 per ns
  EXPECT_EQ(events[1].context, trace.child(PhaseId{0}, traceKernel, S("load")));
  NodeId load = tree.child(PhaseId{0}, kernel, S("load"));
  EXPECT_EQ(std::get<int64_t>(*metric(tree, load, "cycles")), 400);
  EXPECT_EQ(std::get<int64_t>(*metric(tree, tree.child(PhaseId{0}, load, S("wait")), "cycles")),
            200);
  // The kernel scope: the unit's header, start to return.
  EXPECT_EQ(std::get<int64_t>(*metric(tree, kernel, "cycles")), 2000);
}

}  // namespace
}  // namespace proton::instrumentation

namespace proton::instrumentation {
namespace {

// Native scopes' slices (proton/instrument.cuh) are placed at the SM clock's measured rate,
// from each warp's first event: on a GPU running at 1.5 cycles/ns whose nominal clock is 1.98,
// a scope of 1488 cycles lasts 992 ns, and a child ends inside its parent. (Before, each
// slice began at its own quantised %globaltimer and lasted cycles / the nominal clock: the
// body lasted 752 ns, the child ended after its parent once quantised apart.)
TEST(IntraDecoderNative, SlicesUseTheMeasuredClockAndNestWithinTheirWarp) {
  ScopeTables tables;
  IntraDecoder decoder(tables);
  SessionOptions options;
  options.backend = BackendKind::kInstrumentation;
  options.data = DataKind::kTrace;
  Session trace{SessionId{95}, options};
  IntraTarget target{&trace, PhaseId{0}, kRootNode};
  IntraLaunch launch{&target, 1, 0, /*kernelStartNs=*/0, /*cyclesPerNs=*/1.98};
  const uint64_t body = 0xb0d7, math = 0x3a7;
  // One warp (CTA 0, warp 2, SM 5): body [1000, 2488] cycles, math [1048, 2440]; every
  // %globaltimer reading is 10016 ns + cycles since / 1.5, on the timer's 32 ns steps.
  auto event = [&](uint64_t name, uint64_t clock, bool exit) {
    return NativeEvent{7,     name,
                       clock, 10016 + (clock - 1000) * 2 / 3,
                       0,     (5u << 16) | (2u << 1) | (exit ? 1u : 0u),
                       0};
  };
  std::vector<NativeEvent> events = {event(body, 1000, false), event(math, 1048, false),
                                     event(math, 2440, true), event(body, 2488, true)};
  decoder.fileNative(
      events.data(), events.size(), "scaled",
      [&](uint64_t a) { return S(a == body ? "body" : "math"); }, launch);
  std::vector<TraceEvent> slices;
  trace.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    for (const TraceEvent &e : p.events()) slices.push_back(e);
  });
  ASSERT_EQ(slices.size(), 2u);
  const TraceEvent &inner = slices[0].name == S("math") ? slices[0] : slices[1];
  const TraceEvent &outer = slices[0].name == S("math") ? slices[1] : slices[0];
  EXPECT_EQ(outer.beginNs, 10016u);
  EXPECT_EQ(outer.endNs, 11008u);
  EXPECT_EQ(inner.beginNs, 10048u);
  EXPECT_EQ(inner.endNs, 10976u);
  EXPECT_EQ(outer.cycles, 1488u);
  EXPECT_EQ(outer.sm, 5u);
}

}  // namespace
}  // namespace proton::instrumentation
