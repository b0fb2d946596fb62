// context="python" and launch metadata through the SessionManager, with a fake stack walker
// standing in for CPython (the real walker is tested from Python), and a renamed launch
// filed by the KernelAttributor.
#include "context/python_context.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "backends/capture_registry.h"
#include "backends/kernel_attributor.h"
#include "backends/launch_table.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
SessionManager &mgr() { return SessionManager::global(); }

const PythonStack *fakeStack = nullptr;
const PythonStack *fakeCapture() noexcept { return fakeStack; }

const PythonStack *stackOf(std::initializer_list<const char *> frames) {
  std::vector<StringId> ids;
  for (const char *f : frames) ids.push_back(S(f));
  return internPythonStack(ids);
}

std::string pathOf(Session &s, PhaseId phase, NodeId node) {
  std::string out;
  s.readPhase(phase, [&](const PhaseData &p) {
    for (StringId id : p.tree.path(node)) out += "/" + std::string(StringTable::global().view(id));
  });
  return out;
}

// One python and one shadow session, the fake walker installed, all undone at the end.
class PythonContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setPythonStackCapture(&fakeCapture);
    fakeStack = stackOf({"main.py:3@<module>", "main.py:9@step"});
    std::string dir = ::testing::TempDir();
    python_ = start(dir + "/proton_py_ctx_python", ContextKind::kPython);
    shadow_ = start(dir + "/proton_py_ctx_shadow", ContextKind::kShadow);
  }
  void TearDown() override {
    EXPECT_TRUE(mgr().finalize(python_, "", nullptr).isOk());
    EXPECT_TRUE(mgr().finalize(shadow_, "", nullptr).isOk());
    setPythonStackCapture(nullptr);
    fakeStack = nullptr;
  }
  static SessionId start(const std::string &path, ContextKind context) {
    SessionOptions o;
    o.path = path;
    o.context = context;
    Result<StartResult> r = mgr().start(o);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    return r.isOk() ? r.value().id : SessionId{-1};
  }
  // The launch's entry for session id.
  LaunchEntry launch(SessionId id) {
    LaunchEntry entries[LaunchInfo::kMaxEntries];
    uint64_t thread = 0;
    size_t n = mgr().launchContext(entries, LaunchInfo::kMaxEntries, &thread);
    for (size_t i = 0; i < n; ++i)
      if (entries[i].session->id() == id) return entries[i];
    ADD_FAILURE() << "no entry for session " << id.value;
    return {};
  }
  std::string launchPath(SessionId id) {
    LaunchEntry e = launch(id);
    return e.session ? pathOf(*e.session, e.phase, e.node) : "";
  }
  SessionId python_, shadow_;
};

TEST(PythonStackTest, EqualFrameListsShareOneStack) {
  const PythonStack *a = stackOf({"a.py:1@f", "a.py:2@g"});
  EXPECT_EQ(a, stackOf({"a.py:1@f", "a.py:2@g"}));
  EXPECT_NE(a, stackOf({"a.py:1@f", "a.py:3@g"}));
  EXPECT_NE(a, stackOf({"a.py:2@g", "a.py:1@f"}));
  EXPECT_EQ(emptyPythonStack()->frames.size(), 0u);
  EXPECT_EQ(emptyPythonStack(), internPythonStack({}));
}

TEST_F(PythonContextTest, LaunchIsFiledUnderFramesThenScopesThenState) {
  ASSERT_TRUE(mgr().enterScope(S("fwd"), false, nullptr).isOk());
  mgr().enterState(S("st"));
  EXPECT_EQ(launchPath(python_), "/main.py:3@<module>/main.py:9@step/fwd/st");
  EXPECT_EQ(launchPath(shadow_), "/fwd/st");  // shadow sessions never see Python frames
  mgr().exitState();
  ASSERT_TRUE(mgr().exitScope(S("fwd"), {}).isOk());
  EXPECT_EQ(launchPath(python_), "/main.py:3@<module>/main.py:9@step");
  EXPECT_EQ(launchPath(shadow_), "");
}

TEST_F(PythonContextTest, EachStackGetsItsOwnNodeAndRepeatsFindTheSameOne) {
  NodeId first = launch(python_).node;
  fakeStack = stackOf({"main.py:3@<module>", "main.py:10@step"});  // next line
  NodeId second = launch(python_).node;
  EXPECT_NE(first, second);
  EXPECT_EQ(launchPath(python_), "/main.py:3@<module>/main.py:10@step");
  fakeStack = stackOf({"main.py:3@<module>", "main.py:9@step"});
  EXPECT_EQ(launch(python_).node, first);
  ASSERT_TRUE(mgr().enterScope(S("inner"), false, nullptr).isOk());
  NodeId scoped = launch(python_).node;  // same stack, another scope: another node
  EXPECT_NE(scoped, first);
  ASSERT_TRUE(mgr().exitScope(S("inner"), {}).isOk());
  EXPECT_EQ(launch(python_).node, first);
}

TEST_F(PythonContextTest, HundredsOfLaunchSitesInTurnEachKeepTheirNode) {
  // A compiled model's step: one launch site per line of its wrapper, every step, with and
  // without a scope open (the cache of where launches went holds them all, or misses; either
  // way each launch is filed at its own path).
  std::vector<const PythonStack *> sites;
  std::vector<std::string> lines;
  for (int i = 0; i < 600; ++i) {
    lines.push_back("wrapper.py:" + std::to_string(i) + "@call");
    sites.push_back(stackOf({"main.py:3@<module>", lines.back().c_str()}));
  }
  std::vector<NodeId> first(sites.size()), scoped(sites.size());
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < sites.size(); ++i) {
      fakeStack = sites[i];
      NodeId node = launch(python_).node;
      if (step == 0) {
        first[i] = node;
        EXPECT_EQ(launchPath(python_), "/main.py:3@<module>/" + lines[i]);
      }
      EXPECT_EQ(node, first[i]);
    }
    ASSERT_TRUE(mgr().enterScope(S("loss"), false, nullptr).isOk());
    for (size_t i = 0; i < sites.size(); i += 7) {
      fakeStack = sites[i];
      NodeId node = launch(python_).node;
      if (step == 0) scoped[i] = node;
      EXPECT_NE(node, first[i]);
      EXPECT_EQ(node, scoped[i]);
    }
    ASSERT_TRUE(mgr().exitScope(S("loss"), {}).isOk());
  }
}

TEST_F(PythonContextTest, ScopeMetricsLandWhereTheScopeWasEntered) {
  auto metrics = std::make_shared<const MetricList>(
      MetricList{NamedMetric{MetricSpec::parse("n"), int64_t{7}}});
  ASSERT_TRUE(mgr().enterScope(S("s"), false, metrics).isOk());
  fakeStack = stackOf({"main.py:3@<module>", "main.py:9@step", "lib.py:4@helper"});
  EXPECT_EQ(launchPath(python_), "/main.py:3@<module>/main.py:9@step/lib.py:4@helper/s");
  ASSERT_TRUE(mgr().exitScope(S("s"), {NamedMetric{MetricSpec::parse("n"), int64_t{1}}}).isOk());
  Result<std::string> json = mgr().serialize(python_, PhaseId{0}, "hatchet");
  ASSERT_TRUE(json.isOk());
  // Entry and exit metrics both on ROOT/<frames at entry>/s.
  std::string scopeAtEntry =
      "\"name\":\"main.py:9@step\",\"type\":\"function\"},\"metrics\":{},\"children\":[{"
      "\"frame\":{\"name\":\"s\",\"type\":\"function\"},\"metrics\":{\"n\":8}";
  EXPECT_NE(json.value().find(scopeAtEntry), std::string::npos) << json.value();
}

TEST_F(PythonContextTest, OpenScopesAreResolvedAgainInANewPhase) {
  ASSERT_TRUE(mgr().enterScope(S("open"), false, nullptr).isOk());
  EXPECT_EQ(launch(python_).phase, PhaseId{0});
  ASSERT_TRUE(mgr().advancePhase(python_).isOk());
  LaunchEntry e = launch(python_);
  EXPECT_EQ(e.phase, PhaseId{1});
  EXPECT_EQ(pathOf(*e.session, e.phase, e.node), "/main.py:3@<module>/main.py:9@step/open");
  ASSERT_TRUE(mgr().exitScope(S("open"), {}).isOk());
}

TEST_F(PythonContextTest, ContextNamesStartWithTheFramesWhilePythonSessionsLive) {
  ASSERT_TRUE(mgr().enterScope(S("cap"), false, nullptr).isOk());
  std::vector<StringId> names;
  mgr().contextNames(names);
  EXPECT_EQ(names, (std::vector<StringId>{S("main.py:3@<module>"), S("main.py:9@step"), S("cap")}));
  ASSERT_TRUE(mgr().exitScope(S("cap"), {}).isOk());
}

TEST_F(PythonContextTest, NoWalkerMeansNoFrames) {
  setPythonStackCapture(nullptr);
  ASSERT_TRUE(mgr().enterScope(S("only"), false, nullptr).isOk());
  EXPECT_EQ(launchPath(python_), "/only");
  ASSERT_TRUE(mgr().exitScope(S("only"), {}).isOk());
}

TEST_F(PythonContextTest, LaunchMetadataRenamesTheNextLaunchOnlyAndAddsItsMetrics) {
  mgr().pushLaunchMetadata(S("matmul_128"), {NamedMetric{MetricSpec::parse("flops32"), 2.0e6},
                                             NamedMetric{MetricSpec::parse("bytes"), int64_t{64}}});
  LaunchEntry renamed = launch(python_);
  EXPECT_TRUE(renamed.named);
  EXPECT_EQ(pathOf(*renamed.session, renamed.phase, renamed.node),
            "/main.py:3@<module>/main.py:9@step");
  mgr().endLaunch(&renamed, 1, /*ran=*/true);  // the metrics come when the launch returns
  renamed.session->readPhase(renamed.phase, [&](const PhaseData &p) {
    NodeId kernel = p.tree.findChild(renamed.node, S("matmul_128"));
    ASSERT_NE(kernel, kNoNode);
    const FlexMetrics *m = p.flex(kernel);
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->find(S("flops32")), nullptr);
    EXPECT_EQ(std::get<double>(m->find(S("flops32"))->value), 2.0e6);
    EXPECT_EQ(std::get<int64_t>(m->find(S("bytes"))->value), 64);
  });
  LaunchEntry next = launch(python_);  // consumed by the launch above
  EXPECT_FALSE(next.named);
  EXPECT_EQ(pathOf(*next.session, next.phase, next.node), "/main.py:3@<module>/main.py:9@step");

  mgr().pushLaunchMetadata(S("never_launched"), {});
  mgr().popLaunchMetadata();  // the hook's exit with no launch in between
  EXPECT_FALSE(launch(shadow_).named);
}

TEST_F(PythonContextTest, RenamedLaunchRecordIsFiledAtTheRenamedNode) {
  LaunchTable table(64);
  CaptureRegistry captures;
  KernelAttributor attributor(table, captures);
  mgr().pushLaunchMetadata(S("vadd_4096"), {});
  LaunchEntry entries[LaunchInfo::kMaxEntries];
  uint64_t thread = 0;
  StringId name;
  size_t n = mgr().launchContext(entries, LaunchInfo::kMaxEntries, &thread, &name);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(name, S("vadd_4096"));
  table.record(7, entries, static_cast<uint32_t>(n), false, 0, thread, name);
  mgr().endLaunch(entries, n, /*ran=*/true);
  attributor.add(KernelRecord{7, 100, 350, 0, 1, "vadd_kernel", 0});
  for (size_t i = 0; i < n; ++i) {
    const LaunchEntry &e = entries[i];
    ASSERT_TRUE(e.named);
    e.session->readPhase(e.phase, [&](const PhaseData &p) {
      NodeId kernel = p.tree.findChild(e.node, S("vadd_4096"));
      ASSERT_NE(p.kernel(kernel), nullptr);
      EXPECT_EQ(p.kernel(kernel)->count, 1u);
      EXPECT_EQ(p.kernel(kernel)->timeNs, 250u);
      EXPECT_EQ(p.tree.findChild(kernel, S("vadd_kernel")), kNoNode);  // not nested below it
      EXPECT_EQ(p.tree.findChild(e.node, S("vadd_kernel")), kNoNode);  // nor beside it
    });
  }
  EXPECT_EQ(pathOf(*entries[1].session, entries[1].phase, entries[1].node), "");
}

}  // namespace
}  // namespace proton
