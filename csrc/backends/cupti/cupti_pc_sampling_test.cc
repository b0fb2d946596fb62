// Instruction sampling without a GPU: real CUPTI PC sampling structs built here go through
// translatePcData -> PcSampleAttributor (with a line table made up in the test) into the
// kernel frames that real kernel records (KernelActivity) were filed under.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <tuple>

#include "backends/capture_registry.h"
#include "backends/cupti/cupti_pc_translate.h"
#include "backends/cupti/cupti_test_records.h"
#include "backends/cupti/cupti_translate.h"
#include "backends/kernel_attributor.h"
#include "backends/launch_table.h"
#include "backends/pc_sample_attributor.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
uint64_t stat(const char *name) { return Stats::global().counter(name).value(); }

// Stall reason indexes as a Hopper GPU might number them.
enum : uint32_t { kLong = 3, kLongNot = 4, kSelected = 7, kMath = 9, kMathNot = 10 };
const std::vector<std::pair<uint32_t, std::string>> kReasons = {
    {kLong, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
    {kLongNot, "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"},
    {kSelected, "smsp__pcsamp_warps_issue_stalled_selected"},
    {kMath, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"},
    {kMathNot, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle_not_issued"},
};

// A buffer as cuptiPCSamplingGetData fills it (PARSED format).
class RawBuffer {
 public:
  void pc(uint64_t crc, const char *function, uint64_t offset,
          std::vector<std::pair<uint32_t, uint32_t>> reasons) {
    auto &stalls = stalls_.emplace_back();
    for (auto [index, samples] : reasons) {
      CUpti_PCSamplingStallReason r{};
      r.pcSamplingStallReasonIndex = index;
      r.samples = samples;
      stalls.push_back(r);
    }
    CUpti_PCSamplingPCData d{};
    d.size = sizeof(d);
    d.cubinCrc = crc;
    d.pcOffset = offset;
    d.functionName = const_cast<char *>(function);
    d.stallReasonCount = stalls.size();
    d.stallReason = stalls.data();
    pcs_.push_back(d);
  }
  const CUpti_PCSamplingData &data() {
    data_ = CUpti_PCSamplingData{};
    data_.size = sizeof(data_);
    data_.collectNumPcs = pcs_.size();
    data_.totalNumPcs = pcs_.size();
    data_.pPcData = pcs_.data();
    return data_;
  }

 private:
  std::deque<std::vector<CUpti_PCSamplingStallReason>> stalls_;
  std::vector<CUpti_PCSamplingPCData> pcs_;
  CUpti_PCSamplingData data_{};
};

// Line information made up for the test, counting how often it is asked.
class FakeLines : public LineTable {
 public:
  void set(uint64_t module, const std::string &function, uint64_t pc, std::string file,
           uint32_t line) {
    lines_[{module, function, pc}] = SourceLocation{std::move(file), line};
  }
  std::optional<SourceLocation> lookup(uint64_t module, const char *function,
                                       uint64_t pc) override {
    ++lookups;
    auto it = lines_.find({module, function, pc});
    if (it == lines_.end()) return std::nullopt;
    return it->second;
  }
  int lookups = 0;

 private:
  std::map<std::tuple<uint64_t, std::string, uint64_t>, SourceLocation> lines_;
};

SessionOptions samplingOptions() {
  SessionOptions o;
  o.path = "unused";
  o.mode.name = "pcsampling";
  return o;
}

constexpr uint64_t ms = 1'000'000;

class PcSamplingTest : public ::testing::Test {
 protected:
  PcSamplingTest()
      : session_(SessionId{901}, samplingOptions()),
        kernels_(table_, captures_),
        samples_(kernels_),
        reasons_(samples_.stallReasons(kReasons)) {
    session_.setActive(true);
    kernels_.sampleKernelsInto(&samples_);
  }

  // A kernel `name` launched under ROOT/<scope> in `sessions` (none: no session recorded the
  // launch) ran from startNs to endNs; its record goes through the real translation.
  void kernel(const std::string &scope, const char *name, uint64_t startNs, uint64_t endNs,
              std::vector<Session *> sessions) {
    uint32_t corr = ++correlation_;
    std::vector<LaunchEntry> entries;
    for (Session *s : sessions)
      entries.push_back(
          LaunchEntry{s, s->child(s->currentPhase(), kRootNode, S(scope)), s->currentPhase()});
    table_.record(corr, entries.data(), uint32_t(entries.size()), false, 0, 0);
    KernelActivity k = kernelRecord(corr, name, startNs, endNs);
    KernelRecord record;
    ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&k), record));
    kernels_.add(record);
  }
  void kernel(const std::string &scope, const char *name, uint64_t startNs, uint64_t endNs) {
    kernel(scope, name, startNs, endNs, {&session_});
  }

  void read(RawBuffer &raw, const StallReasonMap *reasons = nullptr) {
    std::vector<PcSample> batch;
    std::vector<StallCount> stalls;
    translatePcData(raw.data(), batch, stalls);
    samples_.add(batch.data(), batch.size(), reasons ? *reasons : reasons_, lines_);
  }

  // Metrics of the node at path (names from ROOT); "<exists>" tells that the node exists.
  std::map<std::string, int64_t> metricsAt(Session &s, const std::vector<std::string> &path) {
    std::map<std::string, int64_t> out;
    s.readPhase(s.currentPhase(), [&](const PhaseData &p) {
      NodeId node = kRootNode;
      for (const std::string &n : path) {
        node = p.tree.findChild(node, S(n));
        if (node == kNoNode) return;
      }
      out["<exists>"] = 1;
      if (const FlexMetrics *flex = p.flex(node))
        for (const NamedMetric &m : flex->entries)
          out[std::string(StringTable::global().view(m.spec.name))] = std::get<int64_t>(m.value);
    });
    return out;
  }
  // One PC of `function` seen n times issuing, read and filed at once (a final close).
  void sampleSelected(const char *function, uint32_t n) {
    RawBuffer raw;
    raw.pc(4, function, 0, {{kSelected, n}});
    read(raw);
    samples_.closeWindow(10 * ms, true);
  }
  // Ends a round at nowNs with samples in it, of another kernel (a round ends only with some).
  void roundOfOtherSamples(uint64_t nowNs) {
    kernel("other", "other_kernel", 0, 1 * ms);
    RawBuffer raw;
    raw.pc(8, "other_kernel", 0, {{kSelected, 1}});
    read(raw);
    samples_.closeWindow(nowNs, false);
  }
  int64_t samplesAt(Session &s, const std::vector<std::string> &path) {
    return metricsAt(s, path)["num_samples"];
  }

  LaunchTable table_{1024};
  CaptureRegistry captures_;
  Session session_;
  KernelAttributor kernels_;
  PcSampleAttributor samples_;
  StallReasonMap reasons_;
  FakeLines lines_;
  uint32_t correlation_ = 0;
};

const std::map<std::string, int64_t> kJustTheNode = {{"<exists>", 1}};

TEST_F(PcSamplingTest, SamplesBecomeLineChildrenOfTheKernelFrame) {
  kernel("step", "tri_kernel", 1 * ms, 2 * ms);
  lines_.set(0xc0de, "tri_kernel", 0x10, "/src/k.py", 12);
  lines_.set(0xc0de, "tri_kernel", 0x20, "/src/k.py", 12);
  lines_.set(0xc0de, "tri_kernel", 0x30, "/src/k.py", 20);
  RawBuffer raw;
  raw.pc(0xc0de, "tri_kernel", 0x10, {{kLong, 7}, {kLongNot, 6}, {kSelected, 1}});
  raw.pc(0xc0de, "tri_kernel", 0x20, {{kMath, 2}, {kMathNot, 2}});
  raw.pc(0xc0de, "tri_kernel", 0x30, {{kSelected, 3}});
  read(raw);
  samples_.closeWindow(10 * ms, true);

  EXPECT_EQ(metricsAt(session_, {"step", "tri_kernel", "/src/k.py:12@tri_kernel"}),
            (std::map<std::string, int64_t>{{"<exists>", 1},
                                            {"num_samples", 10},
                                            {"num_stalled_samples", 8},
                                            {"stalled_long_scoreboard", 7},
                                            {"stalled_long_scoreboard_not_issued", 6},
                                            {"stalled_selected", 1},
                                            {"stalled_math_pipe_throttle", 2},
                                            {"stalled_math_pipe_throttle_not_issued", 2}}));
  EXPECT_EQ(metricsAt(session_, {"step", "tri_kernel", "/src/k.py:20@tri_kernel"}),
            (std::map<std::string, int64_t>{{"<exists>", 1},
                                            {"num_samples", 3},
                                            {"num_stalled_samples", 0},
                                            {"stalled_selected", 3}}));
  // The kernel frame itself keeps only its time; readers add the children up.
  EXPECT_EQ(metricsAt(session_, {"step", "tri_kernel"}), kJustTheNode);
}

TEST_F(PcSamplingTest, SamplesWithoutLineInformationStayOnTheKernelAndAreCounted) {
  kernel("step", "_Z4gemmPf", 1 * ms, 2 * ms);  // a library kernel: mangled, no line table
  uint64_t before = stat("pc_samples_without_line_info");
  RawBuffer raw;
  raw.pc(0xb1a5, "_Z4gemmPf", 0x80, {{kMath, 4}, {kMathNot, 1}});
  raw.pc(0xb1a5, "_Z4gemmPf", 0x90, {{kLong, 5}, {kLongNot, 5}});
  read(raw);
  samples_.closeWindow(10 * ms, true);
  EXPECT_EQ(stat("pc_samples_without_line_info"), before + 9);
  EXPECT_EQ(metricsAt(session_, {"step", "gemm(float*)"}),
            (std::map<std::string, int64_t>{{"<exists>", 1},
                                            {"num_samples", 9},
                                            {"num_stalled_samples", 6},
                                            {"stalled_math_pipe_throttle", 4},
                                            {"stalled_math_pipe_throttle_not_issued", 1},
                                            {"stalled_long_scoreboard", 5},
                                            {"stalled_long_scoreboard_not_issued", 5}}));
}

TEST_F(PcSamplingTest, SamplesOfAFunctionThatNeverRanAreHeldThenCounted) {
  uint64_t before = stat("pc_samples_unattributed");
  RawBuffer raw;
  raw.pc(1, "ghost_kernel", 0x10, {{kSelected, 4}, {kLong, 2}, {kLongNot, 2}});
  read(raw);
  samples_.closeWindow(100 * ms, false);
  samples_.closeWindow(500 * ms, false);  // settled, but its kernel may still be running
  EXPECT_EQ(stat("pc_samples_unattributed"), before);
  samples_.closeWindow(600 * ms, true);  // the final close: nothing ran it
  EXPECT_EQ(stat("pc_samples_unattributed"), before + 6);
  session_.readPhase(PhaseId{0}, [](const PhaseData &p) { EXPECT_EQ(p.tree.size(), 1u); });
}

TEST_F(PcSamplingTest, ARoundWaitsForTheRecordsOfItsKernels) {
  lines_.set(5, "late_kernel", 0x10, "k.py", 3);
  RawBuffer raw;
  raw.pc(5, "late_kernel", 0x10, {{kSelected, 2}});
  read(raw);
  samples_.closeWindow(100 * ms, false);
  kernel("late", "late_kernel", 50 * ms, 90 * ms);  // its record comes after the samples
  samples_.closeWindow(150 * ms, false);            // not settled yet
  EXPECT_EQ(samplesAt(session_, {"late", "late_kernel", "k.py:3@late_kernel"}), 0);
  samples_.closeWindow(450 * ms, false);
  EXPECT_EQ(samplesAt(session_, {"late", "late_kernel", "k.py:3@late_kernel"}), 2);
}

TEST_F(PcSamplingTest, EverySamplingSessionGetsAllSamplesOfItsKernels) {
  Session other(SessionId{902}, samplingOptions());
  other.setActive(true);
  SessionOptions plain;
  plain.path = "plain";
  Session timing(SessionId{903}, plain);  // kernel timing only: gets no samples
  timing.setActive(true);
  kernel("step", "k2", 1 * ms, 2 * ms, {&session_, &other, &timing});
  RawBuffer raw;
  raw.pc(9, "k2", 0, {{kLong, 3}, {kLongNot, 3}});
  read(raw);
  samples_.closeWindow(10 * ms, true);
  EXPECT_EQ(samplesAt(session_, {"step", "k2"}), 3);
  EXPECT_EQ(samplesAt(other, {"step", "k2"}), 3);
  EXPECT_EQ(metricsAt(timing, {"step", "k2"}), kJustTheNode);
}

TEST_F(PcSamplingTest, ASessionDeactivatedMidwayGetsOnlyItsKernelsShare) {
  Session other(SessionId{904}, samplingOptions());
  other.setActive(true);
  kernel("both", "k3", 0, 10 * ms, {&session_, &other});
  kernel("only_a", "k3", 10 * ms, 20 * ms, {&session_});  // `other` was deactivated
  RawBuffer raw;
  raw.pc(9, "k3", 0, {{kSelected, 10}});
  read(raw);
  samples_.closeWindow(20 * ms, true);
  EXPECT_EQ(samplesAt(session_, {"both", "k3"}), 5);
  EXPECT_EQ(samplesAt(session_, {"only_a", "k3"}), 5);
  EXPECT_EQ(samplesAt(other, {"both", "k3"}), 5);
  EXPECT_TRUE(metricsAt(other, {"only_a", "k3"}).empty());  // never filed there
}

TEST_F(PcSamplingTest, OneFunctionUnderTwoFramesSplitsItsSamplesByKernelTime) {
  // 10 kernels of 1 ms with 0.5 ms gaps under "a" (one span), one of 2 ms under "b".
  for (uint64_t i = 0; i < 10; ++i)
    kernel("a", "shared_kernel", i * 1500'000, i * 1500'000 + 1 * ms);
  kernel("b", "shared_kernel", 20 * ms, 22 * ms);
  for (uint64_t pc = 0; pc < 12; ++pc) lines_.set(7, "shared_kernel", pc, "s.py", 1);
  uint64_t before = stat("pc_samples_apportioned");
  RawBuffer raw;
  for (uint64_t pc = 0; pc < 12; ++pc) raw.pc(7, "shared_kernel", pc, {{kSelected, 1}});
  read(raw);
  samples_.closeWindow(30 * ms, true);
  EXPECT_EQ(samplesAt(session_, {"a", "shared_kernel", "s.py:1@shared_kernel"}), 10);
  EXPECT_EQ(samplesAt(session_, {"b", "shared_kernel", "s.py:1@shared_kernel"}), 2);
  EXPECT_EQ(stat("pc_samples_apportioned"), before + 12);
}

TEST_F(PcSamplingTest, KernelsOutsideARoundGetNoneOfItsSamples) {
  kernel("early", "k4", 0, 1 * ms);
  roundOfOtherSamples(1000 * ms);
  kernel("late", "k4", 1500 * ms, 1501 * ms);
  RawBuffer raw;
  raw.pc(4, "k4", 0, {{kSelected, 3}});
  read(raw);
  samples_.closeWindow(2000 * ms, true);  // this round covers 800 ms .. 2000 ms
  EXPECT_EQ(samplesAt(session_, {"late", "k4"}), 3);
  EXPECT_EQ(samplesAt(session_, {"early", "k4"}), 0);
}

TEST_F(PcSamplingTest, ARoundWithoutSamplesDoesNotEndTheInterval) {
  kernel("early", "k12", 0, 1 * ms);
  samples_.closeWindow(1000 * ms, false);  // nothing read: the interval goes on
  kernel("late", "k12", 1500 * ms, 1501 * ms);
  RawBuffer raw;
  raw.pc(4, "k12", 0, {{kSelected, 4}});
  read(raw);
  samples_.closeWindow(2000 * ms, true);  // covers both kernels: 1 ms each
  EXPECT_EQ(samplesAt(session_, {"early", "k12"}), 2);
  EXPECT_EQ(samplesAt(session_, {"late", "k12"}), 2);
}

TEST_F(PcSamplingTest, AtTheFinalCloseSamplesGoToTheNearestKernel) {
  kernel("step", "k5", 0, 1 * ms);
  roundOfOtherSamples(4000 * ms);
  RawBuffer raw;
  raw.pc(4, "k5", 0, {{kSelected, 2}});
  read(raw);
  samples_.closeWindow(5000 * ms, true);  // covers 3800 ms .. 5000 ms: no kernel of k5
  EXPECT_EQ(samplesAt(session_, {"step", "k5"}), 2);
}

TEST_F(PcSamplingTest, SamplesOfKernelsNoSamplingSessionRecordedAreSetAside) {
  kernel("step", "k6", 0, 10 * ms);
  kernel("step", "k6", 10 * ms, 20 * ms, {});  // launched while no session recorded
  uint64_t before = stat("pc_samples_of_unrecorded_kernels");
  RawBuffer raw;
  raw.pc(4, "k6", 0, {{kSelected, 8}});
  read(raw);
  samples_.closeWindow(20 * ms, true);
  EXPECT_EQ(samplesAt(session_, {"step", "k6"}), 4);
  EXPECT_EQ(stat("pc_samples_of_unrecorded_kernels"), before + 4);
}

TEST_F(PcSamplingTest, LinesAreLookedUpOncePerPc) {
  kernel("step", "k7", 0, 1000 * ms);
  lines_.set(2, "k7", 0x10, "k.py", 5);
  for (uint64_t i = 1; i <= 3; ++i) {
    RawBuffer raw;
    raw.pc(2, "k7", 0x10, {{kSelected, 1}});
    raw.pc(2, "k7", 0x18, {{kSelected, 1}});  // no line: looked up once too
    read(raw);
    samples_.closeWindow(i * 100 * ms, i == 3);
  }
  EXPECT_EQ(lines_.lookups, 2);
  EXPECT_EQ(samplesAt(session_, {"step", "k7", "k.py:5@k7"}), 3);
  EXPECT_EQ(samplesAt(session_, {"step", "k7"}), 3);
}

TEST_F(PcSamplingTest, WithoutNotIssuedReasonsEverySampleButSelectedIsStalled) {
  StallReasonMap older =
      samples_.stallReasons({{0, "smsp__pcsamp_warps_issue_stalled_selected"},
                             {1, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"}});
  EXPECT_FALSE(older.hasNotIssued());
  EXPECT_TRUE(reasons_.hasNotIssued());
  kernel("step", "k8", 0, 1 * ms);
  RawBuffer raw;
  raw.pc(4, "k8", 0, {{0, 2}, {1, 5}});
  read(raw, &older);
  samples_.closeWindow(10 * ms, true);
  auto m = metricsAt(session_, {"step", "k8"});
  EXPECT_EQ(m["num_samples"], 7);
  EXPECT_EQ(m["num_stalled_samples"], 5);
}

TEST_F(PcSamplingTest, CountersListedAmongStallReasonsAreNoStallReason) {
  StallReasonMap hopper =
      samples_.stallReasons({{0, "smsp__pcsamp_sample_count"},
                             {1, "smsp__pcsamp_samples_data_dropped"},
                             {28, "smsp__pcsamp_warps_issue_stalled_selected"}});
  EXPECT_EQ(hopper.slot(0), StallReasonMap::kNotAStall);
  EXPECT_EQ(hopper.slot(1), StallReasonMap::kDropped);
  kernel("step", "k13", 0, 1 * ms);
  uint64_t dropped = stat("pc_samples_dropped_by_hardware");
  RawBuffer raw;
  raw.pc(4, "k13", 0, {{0, 9}, {1, 2}, {28, 7}});
  read(raw, &hopper);
  samples_.closeWindow(10 * ms, true);
  EXPECT_EQ(metricsAt(session_, {"step", "k13"}),
            (std::map<std::string, int64_t>{{"<exists>", 1},
                                            {"num_samples", 7},
                                            {"num_stalled_samples", 0},
                                            {"stalled_selected", 7}}));
  EXPECT_EQ(stat("pc_samples_dropped_by_hardware"), dropped + 2);
}

TEST_F(PcSamplingTest, UnknownStallReasonIndexIsCounted) {
  kernel("step", "k9", 0, 1 * ms);
  uint64_t before = stat("pc_samples_with_unknown_stall_reason");
  RawBuffer raw;
  raw.pc(4, "k9", 0, {{99, 3}, {kSelected, 1}});
  read(raw);
  samples_.closeWindow(10 * ms, true);
  EXPECT_EQ(stat("pc_samples_with_unknown_stall_reason"), before + 3);
  EXPECT_EQ(samplesAt(session_, {"step", "k9"}), 1);
}

TEST_F(PcSamplingTest, SamplesForAClearedPhaseAreCounted) {
  kernel("step", "k10", 0, 1 * ms);
  session_.clear(PhaseId{0}, false);
  uint64_t before = stat("pc_samples_for_cleared_phase");
  sampleSelected("k10", 2);
  EXPECT_EQ(stat("pc_samples_for_cleared_phase"), before + 2);
}

TEST_F(PcSamplingTest, AForgottenSessionGetsNothingMore) {
  kernel("step", "k11", 0, 1 * ms);
  samples_.forgetSession(session_);
  uint64_t before = stat("pc_samples_of_unrecorded_kernels");
  sampleSelected("k11", 2);
  EXPECT_EQ(stat("pc_samples_of_unrecorded_kernels"), before + 2);
  EXPECT_EQ(metricsAt(session_, {"step", "k11"}), kJustTheNode);
}

TEST(PcTranslateTest, CopiesEveryPcAndItsStallReasons) {
  RawBuffer raw;
  raw.pc(0xabc, "f", 0x40, {{kLong, 2}, {kSelected, 5}});
  raw.pc(0xdef, "g", 0x50, {});
  std::vector<PcSample> batch;
  std::vector<StallCount> stalls;
  translatePcData(raw.data(), batch, stalls);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].module, 0xabcu);
  EXPECT_STREQ(batch[0].function, "f");
  EXPECT_EQ(batch[0].pcOffset, 0x40u);
  ASSERT_EQ(batch[0].numStalls, 2u);
  EXPECT_EQ(batch[0].stalls[0].reason, uint32_t(kLong));
  EXPECT_EQ(batch[0].stalls[0].samples, 2u);
  EXPECT_EQ(batch[0].stalls[1].reason, uint32_t(kSelected));
  EXPECT_EQ(batch[0].stalls[1].samples, 5u);
  EXPECT_EQ(batch[1].module, 0xdefu);
  EXPECT_EQ(batch[1].numStalls, 0u);
}

TEST(PcTranslateTest, IntervalRoundsToTheNearestPowerOfTwoCycles) {
  EXPECT_EQ(periodLog2ForCycles(1000), 10u);
  EXPECT_EQ(periodLog2ForCycles(1024), 10u);
  EXPECT_EQ(periodLog2ForCycles(1), kMinPeriodLog2);
  EXPECT_EQ(periodLog2ForCycles(47), 5u);
  EXPECT_EQ(periodLog2ForCycles(48), 6u);  // halfway: the longer period
  EXPECT_EQ(periodLog2ForCycles(100000), 17u);
  EXPECT_EQ(periodLog2ForCycles(uint64_t(1) << 40), kMaxPeriodLog2);
  ModeSpec mode;
  mode.name = "pcsampling";
  EXPECT_EQ(samplingPeriodLog2(mode).value(), 10u);  // PCSampling()'s 1000 cycles
  mode.options["interval"] = "65536";
  EXPECT_EQ(samplingPeriodLog2(mode).value(), 16u);
  for (const char *bad : {"0", "-4", "abc", "12x", ""}) {
    mode.options["interval"] = bad;
    EXPECT_EQ(samplingPeriodLog2(mode).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  mode.options = {{"period", "4"}};
  Status unknown = samplingPeriodLog2(mode).status();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("Allowed options: interval"), std::string::npos);
}

TEST(PcTranslateTest, StallReasonNamesBecomeSnakeCaseMetricNames) {
  EXPECT_EQ(normalizeStallReason("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
            "long_scoreboard");
  EXPECT_EQ(normalizeStallReason("smsp__pcsamp_warps_issue_stalled_mio_throttle_not_issued"),
            "mio_throttle_not_issued");
  EXPECT_EQ(normalizeStallReason("smsp__pcsamp_sample_count"), "sample_count");
  EXPECT_EQ(normalizeStallReason("Branch Resolving!"), "branch_resolving");
  EXPECT_EQ(normalizeStallReason("__"), "unknown");
  char a[CUPTI_STALL_REASON_STRING_SIZE] = "smsp__pcsamp_warps_issue_stalled_barrier";
  char *names[] = {a};
  uint32_t indexes[] = {6};
  auto list = stallReasonList(indexes, names, 1);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, 6u);
  EXPECT_EQ(list[0].second, "smsp__pcsamp_warps_issue_stalled_barrier");
}

TEST(PcTranslateTest, PermissionErrorSaysWhatToChange) {
  EXPECT_TRUE(isPermissionError(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES));
  EXPECT_FALSE(isPermissionError(CUPTI_ERROR_NOT_SUPPORTED));
  std::string m = samplingUnavailableMessage(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
                                             "cuptiPCSamplingEnable", "insufficient privileges");
  EXPECT_EQ(m.rfind("[PROTON] mode='pcsampling': ", 0), 0u) << m;
  EXPECT_NE(m.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << m;
  EXPECT_NE(m.find("root"), std::string::npos) << m;
  EXPECT_NE(m.find("cuptiPCSamplingEnable failed: insufficient privileges"), std::string::npos);
  EXPECT_NE(m.find("Continuing with kernel timing only."), std::string::npos) << m;
  std::string unsupported =
      samplingUnavailableMessage(CUPTI_ERROR_NOT_SUPPORTED, "cuptiPCSamplingEnable", "no");
  EXPECT_NE(unsupported.find("compute capability 7.0"), std::string::npos) << unsupported;
}

// A 64-bit little-endian ELF file with the given section names (contents empty).
std::vector<char> elfWithSections(const std::vector<std::string> &sections) {
  std::string strtab(1, '\0');
  std::vector<uint32_t> nameAt;
  for (const std::string &s : sections) {
    nameAt.push_back(uint32_t(strtab.size()));
    strtab += s + '\0';
  }
  std::vector<char> elf(64, 0);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF\x02\x01",
              6);
  uint64_t strOffset = elf.size();
  elf.insert(elf.end(), strtab.begin(), strtab.end());
  uint64_t shoff = elf.size();
  uint16_t shentsize = 64, shnum = uint16_t(sections.size()), shstrndx = 0;
  std::memcpy(elf.data() + 40, &shoff, 8);
  std::memcpy(elf.data() + 58, &shentsize, 2);
  std::memcpy(elf.data() + 60, &shnum, 2);
  std::memcpy(elf.data() + 62, &shstrndx, 2);
  for (size_t i = 0; i < sections.size(); ++i) {
    std::vector<char> header(64, 0);
    uint64_t size = i == 0 ? strtab.size() : 0, offset = i == 0 ? strOffset : 0;
    std::memcpy(header.data(), &nameAt[i], 4);
    std::memcpy(header.data() + 24, &offset, 8);
    std::memcpy(header.data() + 32, &size, 8);
    elf.insert(elf.end(), header.begin(), header.end());
  }
  return elf;
}

TEST(PcTranslateTest, CubinLineInformationIsFoundByItsSections) {
  auto with = elfWithSections({".shstrtab", ".text.k", ".nv_debug_line_sass", ".debug_line"});
  EXPECT_EQ(cubinLineInfo(with.data(), with.size()), CubinLines::kPresent);
  auto without = elfWithSections({".shstrtab", ".text.k", ".nv.info"});
  EXPECT_EQ(cubinLineInfo(without.data(), without.size()), CubinLines::kNone);
  EXPECT_EQ(cubinLineInfo("not an elf", 10), CubinLines::kUnknown);
  auto truncated = with;
  truncated.resize(100);
  EXPECT_EQ(cubinLineInfo(truncated.data(), truncated.size()), CubinLines::kUnknown);
}

}  // namespace
}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
