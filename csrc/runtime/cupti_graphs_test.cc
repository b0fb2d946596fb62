// CUDA graphs and launch metadata through the CUPTI backend's real processing code, no GPU:
// launch and graph-node callbacks are real CUpti_CallbackData / CUpti_ResourceData /
// CUpti_GraphData structs fed to LaunchTracker, with sessions of the real SessionManager;
// kernel records are real KernelActivity structs through translateKernel and the
// KernelAttributor. Each test replays one scenario of issue 13 in the order CUPTI delivers it:
// capture callbacks on the launching thread at once, kernel records later (at flush).
#include "backends/cupti/cupti_graphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backends/cupti/cupti_test_records.h"
#include "backends/cupti/cupti_translate.h"
#include "backends/kernel_attributor.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
SessionManager &mgr() { return SessionManager::global(); }
uint64_t stat(const char *name) { return Stats::global().counter(name).value(); }

// cuptiGetGraphNodeId stand-in: the tests' node handles are their ids.
CUptiResult nodeIdOf(CUgraphNode node, uint64_t *id) {
  *id = reinterpret_cast<uintptr_t>(node);
  return CUPTI_SUCCESS;
}
CUgraphNode handle(uint64_t id) { return reinterpret_cast<CUgraphNode>(uintptr_t(id)); }

class CuptiGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tracker_.setNodeIdFn(&nodeIdOf);
    dir_ = ::testing::TempDir() + "proton_graphs_XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override {
    for (SessionId id : started_) EXPECT_TRUE(mgr().finalize(id, "", nullptr).isOk());
  }

  // Starts a tree session (CPU-only: no GPU backend is acquired here) and returns it.
  Session &start(const std::string &name) {
    SessionOptions o;
    o.path = dir_ + "/" + name;
    Result<StartResult> r = mgr().start(o);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    SessionId id = r.value().id;
    started_.push_back(id);
    LaunchEntry entries[LaunchInfo::kMaxEntries];  // how a test reaches the Session object
    uint64_t thread = 0;
    size_t n = mgr().launchContext(entries, LaunchInfo::kMaxEntries, &thread);
    for (size_t i = 0; i < n; ++i)
      if (entries[i].session->id() == id) return *entries[i].session;
    ADD_FAILURE() << "session not active";
    return *entries[0].session;
  }

  // One launch API call as CUPTI reports it: enter, the graph nodes it created (it was being
  // captured), exit.
  void launch(uint32_t correlation, std::vector<uint64_t> createdNodes = {},
              CUpti_CallbackId cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) {
    int result = 0;  // CUDA_SUCCESS
    CUpti_CallbackData cb{};
    cb.callbackSite = CUPTI_API_ENTER;
    cb.correlationId = correlation;
    cb.functionReturnValue = &result;
    tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    for (uint64_t node : createdNodes) graphNode(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, node);
    cb.callbackSite = CUPTI_API_EXIT;
    tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
  }
  void replay(uint32_t correlation) {
    launch(correlation, {}, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
  }
  void graphNode(CUpti_CallbackId cbid, uint64_t node, uint64_t original = 0) {
    CUpti_GraphData graph{};
    graph.node = handle(node);
    graph.originalNode = handle(original);
    CUpti_ResourceData data{};
    data.resourceDescriptor = &graph;
    tracker_.onGraphResource(cbid, &data);
  }
  // cudaGraphInstantiate clones every node; torch then destroys the captured graph.
  void instantiate(const std::vector<std::pair<uint64_t, uint64_t>> &cloneOf) {
    for (auto [clone, original] : cloneOf)
      graphNode(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, clone, original);
    for (auto [clone, original] : cloneOf)
      graphNode(CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, original);
  }
  void destroy(const std::vector<uint64_t> &nodes) {  // g.reset(): the executable graph goes
    for (uint64_t node : nodes) graphNode(CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, node);
  }
  void deliver(const KernelActivity &record) {
    KernelRecord k;
    ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&record), k));
    attributor_.add(k);
  }
  void enter(const char *scope) { ASSERT_TRUE(mgr().enterScope(S(scope), false, nullptr).isOk()); }
  void exit(const char *scope) { ASSERT_TRUE(mgr().exitScope(S(scope), {}).isOk()); }

  // The node at ROOT/<path>, or kNoNode.
  static NodeId at(const PhaseData &p, const std::vector<std::string> &path) {
    NodeId node = kRootNode;
    for (const std::string &n : path)
      if (node != kNoNode) node = p.tree.findChild(node, S(n));
    return node;
  }
  static uint64_t countAt(Session &s, const std::vector<std::string> &path) {
    uint64_t count = 0;
    s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
      NodeId node = at(p, path);
      if (node != kNoNode && p.kernel(node)) count = p.kernel(node)->count;
    });
    return count;
  }
  static bool exists(Session &s, const std::vector<std::string> &path) {
    bool found = false;
    s.readPhase(PhaseId{0}, [&](const PhaseData &p) { found = at(p, path) != kNoNode; });
    return found;
  }
  // A metric of the node at path; nullopt when absent.
  static std::optional<MetricValue> metricAt(Session &s, const std::vector<std::string> &path,
                                             const char *metric) {
    std::optional<MetricValue> out;
    s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
      NodeId node = at(p, path);
      const FlexMetrics *m = node == kNoNode ? nullptr : p.flex(node);
      if (m && m->find(S(metric))) out = m->find(S(metric))->value;
    });
    return out;
  }
  // An int (double) metric of the node at path; -1 (NaN) when absent or of another type.
  static int64_t intAt(Session &s, const std::vector<std::string> &path, const char *metric) {
    std::optional<MetricValue> v = metricAt(s, path, metric);
    return v && std::holds_alternative<int64_t>(*v) ? std::get<int64_t>(*v) : -1;
  }
  static double doubleAt(Session &s, const std::vector<std::string> &path, const char *metric) {
    std::optional<MetricValue> v = metricAt(s, path, metric);
    return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : std::nan("");
  }

  std::string dir_;
  std::vector<SessionId> started_;
  LaunchTable launches_{1024};
  CaptureRegistry captures_;
  LaunchTracker tracker_{launches_, captures_};
  KernelAttributor attributor_{launches_, captures_};
};

// Issue 13, defect 1: the first capture's replays were filed without <captured_at>, because
// g.reset() destroyed the executable graph (its nodes left the registry) before CUPTI
// delivered the replays' records.
TEST_F(CuptiGraphsTest, ReplaysRecordsArrivingAfterTheGraphIsDestroyedKeepTheirCaptureContext) {
  Session &s = start("first_capture");
  uint64_t uncaptured = stat("graph_kernels_without_capture_context");
  launch(1);  // fn() once, outside the graph
  enter("iter_0");
  launch(2, {101});
  exit("iter_0");
  enter("iter_1");
  launch(3, {102});
  exit("iter_1");
  instantiate({{201, 101}, {202, 102}});
  enter("test0");
  replay(10);
  exit("test0");
  enter("test1");
  replay(11);
  exit("test1");
  destroy({201, 202});  // g.reset()
  enter("iter_0");
  launch(20, {103});  // the second capture
  exit("iter_0");
  instantiate({{203, 103}});
  enter("test2");
  replay(30);
  exit("test2");
  // Records come at flush, after all of the above.
  deliver(kernelRecord(1, "foo", 0, 10));
  for (uint32_t corr : {10u, 11u}) {
    deliver(kernelRecord(corr, "foo", 0, 10, 201));
    deliver(kernelRecord(corr, "foo", 20, 30, 202));
  }
  deliver(kernelRecord(30, "foo", 0, 10, 203));

  EXPECT_EQ(countAt(s, {"foo"}), 1u);
  for (const char *replayScope : {"test0", "test1"}) {
    EXPECT_EQ(countAt(s, {replayScope, "<captured_at>", "iter_0", "foo"}), 1u) << replayScope;
    EXPECT_EQ(countAt(s, {replayScope, "<captured_at>", "iter_1", "foo"}), 1u) << replayScope;
    EXPECT_FALSE(exists(s, {replayScope, "foo"})) << replayScope;
  }
  EXPECT_EQ(countAt(s, {"test2", "<captured_at>", "iter_0", "foo"}), 1u);
  EXPECT_FALSE(exists(s, {"iter_0", "foo"}));  // captured launches did not run at capture
  EXPECT_EQ(stat("graph_kernels_without_capture_context"), uncaptured);
  EXPECT_EQ(launches_.outstanding(), 0);

  // Once a flush has filed them, destroyed graphs are forgotten; the live one is kept.
  captures_.forgetRetired(captures_.retiredMark());
  EXPECT_EQ(captures_.find(201), nullptr);
  EXPECT_EQ(captures_.find(101), nullptr);
  EXPECT_NE(captures_.find(203), nullptr);
}

// Issue 13, defect 2: scope_b's kernel was captured while session b was deactivated; its
// replays are not recorded in b (scope_a and scope_c are), and still are in session a.
TEST_F(CuptiGraphsTest, KernelsCapturedWhileASessionWasDeactivatedAreNotReplayedIntoIt) {
  Session &a = start("always_on");
  Session &b = start("toggled");
  enter("scope_a");
  launch(1, {11});
  exit("scope_a");
  ASSERT_TRUE(mgr().deactivate(b.id(), false).isOk());
  enter("scope_b");
  launch(2, {12});
  exit("scope_b");
  ASSERT_TRUE(mgr().activate(b.id()).isOk());
  enter("scope_c");
  launch(3, {13});
  exit("scope_c");
  instantiate({{21, 11}, {22, 12}, {23, 13}});
  enter("test0");
  replay(10);
  exit("test0");
  for (uint64_t node : {21, 22, 23}) deliver(kernelRecord(10, "k", 0, 10, node));

  for (const char *scope : {"scope_a", "scope_c"})
    EXPECT_EQ(countAt(b, {"test0", "<captured_at>", scope, "k"}), 1u) << scope;
  EXPECT_FALSE(exists(b, {"test0", "<captured_at>", "scope_b"}));
  for (const char *scope : {"scope_a", "scope_b", "scope_c"})
    EXPECT_EQ(countAt(a, {"test0", "<captured_at>", scope, "k"}), 1u) << scope;
}

// Issue 13, defect 3: launch metadata evaluated at capture (hook="triton") names the kernel
// and adds its metrics at every replay, on every stream of the graph; a direct launch still
// gets them once, and a captured launch gets none at capture.
TEST_F(CuptiGraphsTest, LaunchMetadataEvaluatedAtCaptureAppliesToEveryReplay) {
  Session &s = start("metadata");
  MetricList metrics{NamedMetric{MetricSpec::parse("flops"), int64_t{100}},
                     NamedMetric{MetricSpec::parse("bytes"), int64_t{8}},
                     NamedMetric{MetricSpec::parse("my_ratio"), 0.5}};
  enter("direct");
  mgr().pushLaunchMetadata(S("foo_test"), metrics);
  launch(1);
  mgr().popLaunchMetadata();  // the hook's exit
  exit("direct");
  enter("iter_0");
  mgr().pushLaunchMetadata(S("foo_test"), metrics);
  launch(2, {101});  // on the capture's origin stream
  mgr().popLaunchMetadata();
  launch(3, {102});  // a torch kernel, no metadata, on a second stream joined into the capture
  mgr().pushLaunchMetadata(S("foo_test"), metrics);
  launch(4, {103});  // on the second stream
  mgr().popLaunchMetadata();
  exit("iter_0");
  instantiate({{201, 101}, {202, 102}, {203, 103}});
  enter("test0");
  for (uint32_t corr : {10u, 11u, 12u}) replay(corr);
  exit("test0");
  deliver(kernelRecord(1, "foo", 0, 10));
  for (uint32_t corr : {10u, 11u, 12u}) {
    deliver(kernelRecord(corr, "foo", 0, 10, 201));
    deliver(kernelRecord(corr, "add", 0, 10, 202));
    KernelActivity other = kernelRecord(corr, "foo", 0, 10, 203);
    other.streamId = 9;
    deliver(other);
  }

  EXPECT_EQ(countAt(s, {"direct", "foo_test"}), 1u);
  EXPECT_EQ(doubleAt(s, {"direct", "foo_test"}, "flops"), 100.0);  // flops are floats
  std::vector<std::string> replayed{"test0", "<captured_at>", "iter_0", "foo_test"};
  EXPECT_EQ(countAt(s, replayed), 6u);  // 3 replays x 2 nodes (two streams)
  EXPECT_EQ(doubleAt(s, replayed, "flops"), 600.0);
  EXPECT_EQ(intAt(s, replayed, "bytes"), 48);
  EXPECT_DOUBLE_EQ(doubleAt(s, replayed, "my_ratio"), 3.0);
  EXPECT_FALSE(exists(s, {"test0", "<captured_at>", "iter_0", "foo"}));
  EXPECT_EQ(countAt(s, {"test0", "<captured_at>", "iter_0", "add"}), 3u);
  EXPECT_FALSE(metricAt(s, {"test0", "<captured_at>", "iter_0", "add"}, "flops"));
  EXPECT_FALSE(exists(s, {"iter_0", "foo_test"}));  // nothing filed at capture
  EXPECT_FALSE(exists(s, {"iter_0", "foo"}));
}

// Issue 13, item 4: kernels launched while a launch metadata function runs are filed under
// __proton_launch_metadata/<the kernel being launched>, and get no metadata of their own.
TEST_F(CuptiGraphsTest, KernelsLaunchedInsideLaunchMetadataGoUnderTheLaunchedKernelsName) {
  Session &s = start("inside_metadata");
  enter("tri");
  for (uint32_t i = 0; i < 2; ++i) {
    StateTag previous = mgr().exchangeState({S("__proton_launch_metadata"), S("probed_kernel")});
    launch(1 + 2 * i);  // x.sum() in the metadata function
    mgr().exchangeState(previous);
    mgr().pushLaunchMetadata(S("probed"), {NamedMetric{MetricSpec::parse("flops"), int64_t{1}}});
    launch(2 + 2 * i);  // the kernel itself
    mgr().popLaunchMetadata();
  }
  exit("tri");
  for (uint32_t corr : {1u, 3u}) deliver(kernelRecord(corr, "reduce_kernel", 0, 10));
  for (uint32_t corr : {2u, 4u}) deliver(kernelRecord(corr, "probed_kernel", 0, 10));

  EXPECT_EQ(countAt(s, {"tri", "__proton_launch_metadata", "probed_kernel", "reduce_kernel"}), 2u);
  EXPECT_FALSE(exists(s, {"tri", "__proton_launch_metadata", "reduce_kernel"}));
  EXPECT_EQ(countAt(s, {"tri", "probed"}), 2u);
  EXPECT_EQ(doubleAt(s, {"tri", "probed"}, "flops"), 2.0);
  EXPECT_FALSE(exists(s, {"tri", "probed_kernel"}));
}

// Proton's copy of tensor metric values is a kernel filed as <metric> under
// __proton_launch_metadata (and the launched kernel's name, for launch metadata), as
// triton.profiler files its copy kernel: below a scope being entered, outside the thread's
// state tag, consuming no launch metadata; captured, it is filed at each replay.
TEST_F(CuptiGraphsTest, MetricCopyKernelIsFiledAsMetricUnderTheMetadataFrame) {
  Session &s = start("metric_copy");
  using Placement = SessionManager::MetricCopyPlacement;
  enter("tri");
  {
    // hooks.launch evaluated foo's metadata; its tensors are copied after the state is left.
    mgr().pushLaunchMetadata(S("foo_test"), {NamedMetric{MetricSpec::parse("flops"), 1.0}});
    Placement placement(StringId{}, S("foo"));
    launch(1);
  }
  launch(2);  // foo itself: the metadata is still its own
  mgr().popLaunchMetadata();
  {
    StateTag previous = mgr().exchangeState({S("__proton_launch_metadata"), S("foo")});
    Placement placement(StringId{}, S("foo"));  // under a state: not nested twice
    launch(3);
    mgr().exchangeState(previous);
  }
  {
    Placement placement(S("c"), StringId{});  // scope c's values, copied before c opens
    launch(4);
  }
  enter("a");
  {
    Placement placement(S("c"), StringId{});  // the same, captured into a graph
    launch(5, {105});
  }
  exit("a");
  exit("tri");
  instantiate({{205, 105}});
  enter("test0");
  replay(10);
  replay(11);
  exit("test0");
  for (uint32_t corr : {1u, 3u, 4u}) deliver(kernelRecord(corr, "proton_metric_copy", 0, 10));
  deliver(kernelRecord(2, "foo", 0, 10));
  for (uint32_t corr : {10u, 11u}) deliver(kernelRecord(corr, "proton_metric_copy", 0, 10, 205));

  EXPECT_EQ(countAt(s, {"tri", "__proton_launch_metadata", "foo", "<metric>"}), 2u);
  EXPECT_FALSE(exists(s, {"tri", "__proton_launch_metadata", "foo", "__proton_launch_metadata"}));
  EXPECT_EQ(countAt(s, {"tri", "foo_test"}), 1u);
  EXPECT_EQ(doubleAt(s, {"tri", "foo_test"}, "flops"), 1.0);
  EXPECT_EQ(countAt(s, {"tri", "c", "__proton_launch_metadata", "<metric>"}), 1u);
  EXPECT_EQ(countAt(s, {"test0", "<captured_at>", "tri", "a", "c", "__proton_launch_metadata",
                        "<metric>"}),
            2u);
  EXPECT_FALSE(exists(s, {"tri", "proton_metric_copy"}));
  EXPECT_EQ(countAt(s, {"tri", "a", "c", "__proton_launch_metadata", "<metric>"}), 0u);
}

// A launch that failed gets neither its record slot nor its launch metadata's metrics.
TEST_F(CuptiGraphsTest, FailedLaunchWithMetadataAddsNoMetricsAndIsNotPending) {
  Session &s = start("failed");
  mgr().pushLaunchMetadata(S("foo_test"), {NamedMetric{MetricSpec::parse("flops"), int64_t{1}}});
  int result = 1;  // CUDA_ERROR_INVALID_VALUE
  CUpti_CallbackData cb{};
  cb.callbackSite = CUPTI_API_ENTER;
  cb.correlationId = 5;
  cb.functionReturnValue = &result;
  tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &cb);
  cb.callbackSite = CUPTI_API_EXIT;
  tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &cb);
  mgr().popLaunchMetadata();
  EXPECT_EQ(launches_.outstanding(), 0);
  EXPECT_FALSE(exists(s, {"foo_test"}));
}

}  // namespace
}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti

namespace proton::cupti {
namespace {

// What an observer of records (the intra-kernel buffers, scopes of instrument.cuh kernels)
// learns: where each record was filed, a replay's under <replay context>/<captured_at>/
// <capture context>, so that scopes of a kernel no launch callback saw (a graph's) go to the
// frame its record went to.
struct Observed {
  uint64_t correlation;
  std::vector<NodeId> under;
};
std::vector<Observed> observed;
void observe(const KernelRecord &r, const LaunchEntry *filedUnder, size_t n, StringId) {
  Observed o{r.correlation, {}};
  for (size_t i = 0; i < n; ++i) o.under.push_back(filedUnder[i].node);
  observed.push_back(o);
}

TEST_F(CuptiGraphsTest, RecordObserversLearnTheNodeEachRecordWasFiledUnder) {
  Session &s = start("observed");
  observed.clear();
  attributor_.observeRecords(&observe);
  launch(1);
  enter("iter_0");
  launch(2, {101});
  exit("iter_0");
  instantiate({{201, 101}});
  enter("test0");
  replay(10);
  exit("test0");
  deliver(kernelRecord(1, "foo", 0, 10));
  deliver(kernelRecord(10, "foo", 0, 10, 201));
  deliver(kernelRecord(99, "foo", 0, 10));  // a launch Proton never saw: observed, not filed
  attributor_.observeRecords(nullptr);
  NodeId underReplay = kNoNode;
  s.readPhase(PhaseId{0}, [&](const PhaseData &p) {
    underReplay = at(p, {"test0", "<captured_at>", "iter_0"});
  });
  ASSERT_NE(underReplay, kNoNode);
  ASSERT_EQ(observed.size(), 3u);
  EXPECT_EQ(observed[0].under, std::vector<NodeId>{kRootNode});
  EXPECT_EQ(observed[1].under, std::vector<NodeId>{underReplay});
  EXPECT_EQ(observed[2].correlation, 99u);
  EXPECT_TRUE(observed[2].under.empty());
}

}  // namespace
}  // namespace proton::cupti

namespace proton::cupti {
namespace {

// The graph-launch hooks the slots of captured graphs rely on (graph_slots.h): one call at the
// outermost launch's enter, one at its exit with whether it ran, with the per-thread stream's
// handle for a _ptsz call's null stream (the driver would read null as the legacy stream).
struct GraphCall {
  CUgraphExec exec;
  CUstream stream;
  bool enter;
  bool ran;
};
std::vector<GraphCall> graphCalls;
void graphEntering(CUgraphExec exec, CUstream stream) {
  graphCalls.push_back({exec, stream, true, false});
}
void graphLaunched(CUgraphExec exec, CUstream stream, const LaunchEntry *, size_t, uint64_t,
                   uint64_t, bool ran) {
  graphCalls.push_back({exec, stream, false, ran});
}

TEST_F(CuptiGraphsTest, GraphLaunchHooksPairEveryEnterWithAnExitThatSaysWhetherItRan) {
  start("graph_hooks");
  tracker_.setGraphLaunchFns(&graphEntering, &graphLaunched);
  graphCalls.clear();
  const auto exec = reinterpret_cast<CUgraphExec>(0x7400);
  struct {
    CUgraphExec exec;
    CUstream stream;
  } params{exec, nullptr};
  auto call = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, int result,
                  std::vector<uint64_t> createdNodes = {}) {
    CUpti_CallbackData cb{};
    cb.callbackSite = CUPTI_API_ENTER;
    cb.correlationId = 60;
    cb.functionParams = &params;
    cb.functionReturnValue = &result;
    tracker_.onLaunch(domain, cbid, &cb);
    // The runtime's call reaches the driver's: one launch.
    tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &cb);
    for (uint64_t node : createdNodes) graphNode(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, node);
    cb.callbackSite = CUPTI_API_EXIT;
    tracker_.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &cb);
    tracker_.onLaunch(domain, cbid, &cb);
  };
  call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, 0);
  ASSERT_EQ(graphCalls.size(), 2u);
  EXPECT_TRUE(graphCalls[0].enter);
  EXPECT_EQ(graphCalls[0].exec, exec);
  EXPECT_EQ(graphCalls[0].stream, CU_STREAM_PER_THREAD);
  EXPECT_FALSE(graphCalls[1].enter);
  EXPECT_EQ(graphCalls[1].stream, CU_STREAM_PER_THREAD);
  EXPECT_TRUE(graphCalls[1].ran);
  // A failed launch, and one launched into a capture (a child graph node made), did not run.
  call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1);
  call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 0, {901});
  ASSERT_EQ(graphCalls.size(), 6u);
  EXPECT_EQ(graphCalls[2].stream, nullptr);  // not a _ptsz call: null is the legacy stream
  EXPECT_FALSE(graphCalls[3].ran);
  EXPECT_FALSE(graphCalls[5].ran);
  tracker_.setGraphLaunchFns(nullptr, nullptr);
}

}  // namespace
}  // namespace proton::cupti
