// Framework frames and backward attribution through the session manager: what a launch on a
// thread would be filed under (contextNames), for frames an adapter pushes and for a backward
// worker borrowing its caller's context.
#include "runtime/framework_frames.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "context/backward_borrow.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"
#include "runtime/session_manager_internal.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
SessionManager &mgr() { return SessionManager::global(); }

struct ContextSession {
  explicit ContextSession(const std::string &context) {
    SessionOptions o;
    o.path = ::testing::TempDir() + "proton_fw_" + std::to_string(getpid()) + "_" +
             std::to_string(counter++);
    o.sources = parseContextSources(context).value();
    Result<StartResult> r = mgr().start(o);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    id = r.value().id;
  }
  ~ContextSession() { EXPECT_TRUE(mgr().finalize(id, "", nullptr).isOk()); }
  SessionId id;
  static inline int counter = 0;
};

std::vector<std::string> names() {
  std::vector<StringId> ids;
  mgr().contextNames(ids);
  std::vector<std::string> out;
  for (StringId id : ids) out.emplace_back(StringTable::global().view(id));
  return out;
}

using Names = std::vector<std::string>;

TEST(FrameworkFramesTest, OperatorsAndModulesNestUnderScopesOnlyForFrameworkSessions) {
  {
    ContextSession shadow("shadow");
    frameworkApi()->enter_op("aten::linear", PROTON_OP_FORWARD, -1, 1, 0);
    EXPECT_EQ(names(), Names{});  // no session wants them: nothing pushed
    frameworkApi()->exit_op();
  }
  ContextSession torch("torch");
  ASSERT_TRUE(mgr().enterScope(S("step"), false, nullptr).isOk());
  enterModuleFrame(S("fc1 (Linear)"));
  frameworkApi()->enter_op("aten::linear", PROTON_OP_FORWARD, 3, 1, 0);
  frameworkApi()->enter_op("aten::addmm", PROTON_OP_FORWARD, 3, 1, 0);
  frameworkApi()->enter_op("skipped", PROTON_OP_SKIP, -1, 1, 0);
  EXPECT_EQ(names(), (Names{"step", "fc1 (Linear)", "aten::linear", "aten::addmm"}));
  frameworkApi()->exit_op();
  frameworkApi()->exit_op();
  frameworkApi()->exit_op();
  exitModuleFrame();
  EXPECT_EQ(names(), Names{"step"});
  // The backward node of sequence number 3 goes under the module its forward operator ran in.
  frameworkApi()->enter_op("AddmmBackward0", PROTON_OP_BACKWARD, 3, 9, 1);
  EXPECT_EQ(names(), (Names{"step", "fc1 (Linear)", "backward: aten::addmm"}));
  frameworkApi()->exit_op();
  frameworkApi()->enter_op("MulBackward0", PROTON_OP_BACKWARD, 77, 9, 1);  // no forward seen
  EXPECT_EQ(names(), (Names{"step", "backward: MulBackward0"}));
  frameworkApi()->exit_op();
  ASSERT_TRUE(mgr().exitScope(S("step"), {}).isOk());
}

TEST(FrameworkFramesTest, AScopeLeftOpenInsideAModuleClosesWithIt) {
  ContextSession torch("torch");
  enterModuleFrame(S("block (Block)"));
  ASSERT_TRUE(mgr().enterScope(S("forgotten"), false, nullptr).isOk());
  exitModuleFrame();
  EXPECT_EQ(names(), Names{});
}

TEST(FrameworkFramesTest, ABackwardWorkerFilesUnderTheCallersContext) {
  ContextSession shadow("shadow");
  setBackwardWorkerPrefixes({"pt_autograd_"});
  std::vector<Names> seen;
  ASSERT_TRUE(mgr().enterScope(S("train"), false, nullptr).isOk());
  BackwardToken token = mgr().enterBackward();
  EXPECT_EQ(backwardsInFlight(), 1u);
  for (const char *threadName : {"pt_autograd_0", "other"}) {
    std::thread([&, threadName] {
      prctl(PR_SET_NAME, threadName, 0, 0, 0);
      ASSERT_TRUE(mgr().enterScope(S("node"), false, nullptr).isOk());
      seen.push_back(names());
      ASSERT_TRUE(mgr().exitScope(S("node"), {}).isOk());
    }).join();
  }
  mgr().exitBackward(token);
  EXPECT_EQ(backwardsInFlight(), 0u);
  ASSERT_TRUE(mgr().exitScope(S("train"), {}).isOk());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (Names{"train", "node"}));
  // Not a worker: a native thread inherits the main thread's stack (here the test's thread is
  // not registered as main by this test), never the pass's.
  EXPECT_EQ(seen[1].back(), "node");
}

TEST(FrameworkFramesTest, SplicedEntriesGoBetweenStackFramesAtTheirDepth) {
  struct Entry {
    StringId name;
    int32_t spliceDepth;
  };
  const PythonStack *stack = internPythonStack({S("a"), S("b"), S("c"), S("d")});
  std::vector<Entry> entries{{S("M1"), 1}, {S("op"), -1}, {S("M2"), 3}, {S("scope"), -1}};
  Names out;
  detail::splicePath(stack, entries.data(), entries.size(),
                     [&](StringId n) { out.emplace_back(StringTable::global().view(n)); });
  EXPECT_EQ(out, (Names{"a", "M1", "b", "c", "op", "M2", "d", "scope"}));
  out.clear();
  std::vector<Entry> scopesOnly{{S("s1"), -1}, {S("s2"), -1}};
  detail::splicePath(stack, scopesOnly.data(), scopesOnly.size(),
                     [&](StringId n) { out.emplace_back(StringTable::global().view(n)); });
  EXPECT_EQ(out, (Names{"a", "b", "c", "d", "s1", "s2"}));  // context="python" as always
}

// Cost of one operator's frame (enter_op and exit_op, as PyTorch's observer calls them) in a
// context="torch" tree session, under a module frame: run by hand with
// --gtest_also_run_disabled_tests --gtest_filter='*NanosecondsPerOperator*'.
TEST(FrameworkFramesTest, DISABLED_PrintsNanosecondsPerOperator) {
  ContextSession torch("torch");
  enterModuleFrame(S("fc1 (Linear)"));
  const char *ops[] = {"aten::linear", "aten::addmm", "aten::gelu", "aten::t"};
  constexpr int kRounds = 2000000;
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    frameworkApi()->enter_op(ops[i & 3], PROTON_OP_FORWARD, i, 1, 0);
    frameworkApi()->exit_op();
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count() /
      kRounds;
  exitModuleFrame();
  std::printf("%.1f ns per operator frame (enter and exit)\n", ns);
}

}  // namespace
}  // namespace proton
