// SessionManager through its public API. The manager is a process-wide singleton: every test
// finalizes the sessions it starts (into a temporary directory) and leaves no scope open.
#include "runtime/session_manager.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "backends/runtime_probe.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
SessionManager &mgr() { return SessionManager::global(); }

std::string tempPath(const std::string &name) {
  static const std::string dir = [] {
    std::string tmpl = ::testing::TempDir() + "proton_sm_XXXXXX";
    char *made = mkdtemp(tmpl.data());
    return std::string(made ? made : "/tmp");
  }();
  return dir + "/" + name;
}

// Starts a session and finalizes it (writing under the temp dir) when the test ends.
struct ScopedSession {
  explicit ScopedSession(const std::string &name, DataKind data = DataKind::kTree) {
    SessionOptions o;
    o.path = tempPath(name);
    o.data = data;
    Result<StartResult> r = mgr().start(o);
    EXPECT_TRUE(r.isOk()) << r.status().message();
    if (r.isOk()) result = r.value();
    id = result.id;
  }
  ~ScopedSession() { EXPECT_TRUE(mgr().finalize(id, "", nullptr).isOk()); }
  SessionId id;
  StartResult result;
};

// Element 0 of the serialized hatchet JSON: the tree.
std::string tree(SessionId id, PhaseId phase = PhaseId{0}) {
  Result<std::string> json = mgr().serialize(id, phase, "hatchet");
  EXPECT_TRUE(json.isOk()) << json.status().message();
  if (!json.isOk()) return "";
  const std::string &s = json.value();
  int depth = 0;
  bool inString = false;
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      // The root's last key is the profile metadata; the tests compare the tree only.
      std::string root = s.substr(1, i);
      size_t meta = root.rfind(",\"proton_metadata\":");
      return meta == std::string::npos ? root : root.substr(0, meta) + "}";
    }
  }
  return "";
}

// One hatchet node as the JSON writer prints it.
std::string N(const std::string &name, const std::string &metrics = "",
              const std::vector<std::string> &children = {}) {
  std::string out = "{\"frame\":{\"name\":\"" + name + "\",\"type\":\"function\"},\"metrics\":{" +
                    metrics + "},\"children\":[";
  for (size_t i = 0; i < children.size(); ++i) out += (i ? "," : "") + children[i];
  return out + "]}";
}

void enter(const std::string &name, const MetricList *metrics = nullptr) {
  auto list = metrics ? std::make_shared<const MetricList>(*metrics) : nullptr;
  ASSERT_TRUE(mgr().enterScope(S(name), false, list).isOk());
}
void exit(const std::string &name) { ASSERT_TRUE(mgr().exitScope(S(name), {}).isOk()); }
NamedMetric M(const std::string &name, MetricValue v) { return {MetricSpec::parse(name), v}; }

TEST(SessionManagerTest, SamePathReturnsTheSameSessionAndIdsAreNeverReused) {
  SessionId first;
  {
    ScopedSession a("same");
    EXPECT_TRUE(a.result.created);
    SessionOptions o;
    o.path = tempPath("same");
    Result<StartResult> again = mgr().start(o);
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(again.value().id, a.id);
    EXPECT_FALSE(again.value().created);
    EXPECT_EQ(again.value().warning, "");
    first = a.id;
  }
  ScopedSession b("same");
  EXPECT_TRUE(b.result.created);
  EXPECT_GT(b.id.value, first.value);
}

TEST(SessionManagerTest, AutoBackendWarnsAtMostOnce) {
  ScopedSession a("warn_a");
  ScopedSession b("warn_b");
  const std::string &w = a.result.warning;
  if (!w.empty()) {
    EXPECT_EQ(w.rfind("[PROTON] ", 0), 0u) << w;
    EXPECT_NE(w.find("; recording CPU scopes and metrics only"), std::string::npos) << w;
  }
  EXPECT_EQ(b.result.warning, "");  // whoever warned first, a later session never does
}

TEST(SessionManagerTest, UnavailableOptionsAreRefused) {
  SessionOptions o;
  o.path = tempPath("refused");
  o.backend = BackendKind::kRoctracer;
  Result<StartResult> r = mgr().start(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(),
            "[PROTON] backend='roctracer' is not available in this build of Proton.");
  o.backend = BackendKind::kAuto;
  o.mode.name = "default";
  EXPECT_EQ(mgr().start(o).status().message(),
            "[PROTON] mode='default' is not supported by the default backend (cupti on an NVIDIA "
            "GPU, CPU scopes only elsewhere) in this build of Proton.");
  o.mode.name = "mma";  // an instrumentation mode: refused with any other backend
  EXPECT_EQ(mgr().start(o).status().message(),
            "[PROTON] mode='mma' is an intra-kernel instrumentation mode: use it with "
            "backend='instrumentation'.");
  if (!probeCudaRuntime().available) {
    // Sampling needs a GPU: an error, never a silent CPU-only profile.
    o.mode.name = "pcsampling";
    Result<StartResult> sampling = mgr().start(o);
    ASSERT_FALSE(sampling.isOk());
    EXPECT_EQ(sampling.status().message().rfind("[PROTON] mode='pcsampling' needs an NVIDIA GPU, "
                                                "but ",
                                                0),
              0u)
        << sampling.status().message();
    o.mode = parseModeSpec("default:granularity=warp").value();
    o.backend = BackendKind::kInstrumentation;
    Result<StartResult> intra = mgr().start(o);
    ASSERT_FALSE(intra.isOk());
    EXPECT_EQ(intra.status().message().rfind(
                  "[PROTON] backend='instrumentation' needs an NVIDIA GPU, but ", 0),
              0u)
        << intra.status().message();
  }
}

TEST(SessionManagerTest, UnknownOrFinalizedIdIsNotInitialized) {
  SessionId gone;
  {
    ScopedSession s("gone");
    gone = s.id;
  }
  for (SessionId id : {SessionId{123456}, SessionId{-1}, gone}) {
    std::string want = "Session has not been initialized: " + std::to_string(id.value);
    Result<PhaseId> p = mgr().advancePhase(id);
    ASSERT_FALSE(p.isOk());
    EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(p.status().message(), want);
    EXPECT_EQ(mgr().depth(id).status().message(), want);
    EXPECT_EQ(mgr().clear(id, PhaseId{0}, false).message(), want);
    EXPECT_EQ(mgr().activate(id).message(), want);
    EXPECT_EQ(mgr().deactivate(id, false).message(), want);
    EXPECT_EQ(mgr().isPhaseComplete(id, PhaseId{0}).status().message(), want);
    EXPECT_EQ(mgr().serialize(id, PhaseId{0}, "").status().message(), want);
  }
  EXPECT_TRUE(mgr().finalize(gone, "", nullptr).isOk());  // twice is harmless
  EXPECT_EQ(mgr().finalize(SessionId{123456}, "", nullptr).message(),
            "Session has not been initialized: 123456");
}

TEST(SessionManagerTest, NestedScopesBuildTheTreeInOrder) {
  ScopedSession s("nested");
  uint64_t enterId = 0, exitId = 0;
  ASSERT_TRUE(mgr().enterScope(S("a"), false, nullptr, &enterId).isOk());
  enter("b");
  EXPECT_EQ(mgr().depth(s.id).value(), 2u);
  exit("b");
  enter("c");
  exit("c");
  enter("b");
  exit("b");
  ASSERT_TRUE(mgr().exitScope(std::nullopt, {}, &exitId).isOk());
  EXPECT_EQ(enterId, exitId);
  EXPECT_EQ(mgr().depth(s.id).value(), 0u);
  EXPECT_EQ(tree(s.id), N("ROOT", "", {N("a", "", {N("b"), N("c")})}));
}

TEST(SessionManagerTest, MetricsAtEntryAndExitAreAddedToTheScopeNode) {
  ScopedSession s("metrics");
  MetricList atEntry{M("flops", int64_t{10})};
  for (int i = 0; i < 3; ++i) {
    enter("step", &atEntry);
    ASSERT_TRUE(mgr().exitScope(S("step"), {M("bytes (exc)", int64_t{5})}).isOk());
  }
  EXPECT_EQ(tree(s.id), N("ROOT", "\"flops\":0.0", {N("step", "\"flops\":30.0,\"bytes\":15")}));
}

TEST(SessionManagerTest, MetricTypeChangeAtEntryIsRefusedAndOpensNoScope) {
  ScopedSession s("mtype");
  MetricList asInt{M("v", int64_t{1})};
  MetricList asString{M("v", std::string("two"))};
  enter("x", &asInt);
  Status st = mgr().enterScope(S("y"), false, std::make_shared<const MetricList>(asString));
  EXPECT_EQ(st.code(), StatusCode::kMetricType);
  EXPECT_EQ(st.message(), "[PROTON] Metric value type mismatch for 'v': current=int, new=str");
  EXPECT_EQ(mgr().depth(s.id).value(), 1u);
  exit("x");
}

TEST(SessionManagerTest, NameMismatchIsAnErrorAndLeavesTheStackUsable) {
  ScopedSession s("mismatch");
  enter("outer");
  enter("inner");
  Status st = mgr().exitScope(S("outer"), {});
  EXPECT_EQ(st.code(), StatusCode::kScopeMismatch);
  EXPECT_EQ(st.message(),
            "[PROTON] Scope name mismatch: exit_scope('outer') but the innermost open scope is "
            "'inner'");
  EXPECT_EQ(mgr().depth(s.id).value(), 2u);
  exit("inner");
  enter("again");
  exit("again");
  exit("outer");
  EXPECT_EQ(tree(s.id), N("ROOT", "", {N("outer", "", {N("inner"), N("again")})}));
}

TEST(SessionManagerTest, ExitWithoutEnterIsAnError) {
  ScopedSession s("noenter");
  Status unnamed = mgr().exitScope(std::nullopt, {});
  EXPECT_EQ(unnamed.code(), StatusCode::kScopeMismatch);
  EXPECT_EQ(unnamed.message(), "[PROTON] exit_scope() called with no open scope");
  EXPECT_EQ(mgr().exitScope(S("x"), {}).message(),
            "[PROTON] exit_scope('x') called with no open scope");
  enter("ok");
  exit("ok");
  EXPECT_EQ(tree(s.id), N("ROOT", "", {N("ok")}));
}

TEST(SessionManagerTest, ScopesEnteredWhileInactiveAreNotRecorded) {
  ScopedSession s("inactive");
  enter("a");
  ASSERT_TRUE(mgr().deactivate(s.id, false).isOk());
  enter("hidden");
  EXPECT_EQ(mgr().depth(s.id).value(), 1u);
  ASSERT_TRUE(mgr().activate(s.id).isOk());
  enter("c");
  EXPECT_EQ(mgr().depth(s.id).value(), 2u);
  exit("c");
  exit("hidden");
  exit("a");
  ASSERT_TRUE(mgr().deactivate(std::nullopt, false).isOk());
  enter("d");
  exit("d");
  ASSERT_TRUE(mgr().activate(std::nullopt).isOk());
  EXPECT_EQ(tree(s.id), N("ROOT", "", {N("a", "", {N("c")})}));
}

TEST(SessionManagerTest, StateTagAddsAChildFrame) {
  ScopedSession s("state");
  MetricList m{M("n", int64_t{1})};
  enter("op");
  mgr().enterState(S("backward"));
  enter("k", &m);
  exit("k");
  mgr().exitState();
  enter("k", &m);
  exit("k");
  exit("op");
  EXPECT_EQ(tree(s.id),
            N("ROOT", "\"n\":0", {N("op", "", {N("k", "\"n\":1", {N("backward", "\"n\":1")})})}));
  // currentNode files work under the state; a session of its own shows exactly where.
  Session own(SessionId{100000}, SessionOptions{});
  PhaseId phase;
  EXPECT_EQ(mgr().currentNode(own, phase), kRootNode);
  mgr().enterState(S("backward"));
  NodeId n = mgr().currentNode(own, phase);
  mgr().exitState();
  EXPECT_EQ(phase, PhaseId{0});
  own.readPhase(phase, [&](const PhaseData &p) {
    EXPECT_EQ(p.tree.path(n), (std::vector<StringId>{S("backward")}));
  });
}

TEST(SessionManagerTest, PhasesThroughTheManager) {
  ScopedSession s("phases");
  enter("open");
  enter("p0");
  exit("p0");
  EXPECT_EQ(mgr().advancePhase(s.id).value(), PhaseId{1});
  EXPECT_TRUE(mgr().isPhaseComplete(s.id, PhaseId{0}).value());
  EXPECT_FALSE(mgr().isPhaseComplete(s.id, PhaseId{1}).value());
  enter("p1");  // the open scope is re-resolved in the new phase
  exit("p1");
  EXPECT_EQ(tree(s.id, PhaseId{0}), N("ROOT", "", {N("open", "", {N("p0")})}));
  EXPECT_EQ(tree(s.id, PhaseId{1}), N("ROOT", "", {N("open", "", {N("p1")})}));
  ASSERT_TRUE(mgr().clear(s.id, PhaseId{0}, false).isOk());
  Result<std::string> gone = mgr().serialize(s.id, PhaseId{0}, "hatchet");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.status().message(),
            "[PROTON] Session " + std::to_string(s.id.value) + " has no data for phase 0");
  ASSERT_TRUE(mgr().clear(s.id, PhaseId{1}, true).isOk());  // the current phase: emptied
  EXPECT_EQ(tree(s.id, PhaseId{1}), N("ROOT"));
  enter("after");
  exit("after");
  exit("open");
  EXPECT_EQ(tree(s.id, PhaseId{1}), N("ROOT", "", {N("open", "", {N("after")})}));
}

TEST(SessionManagerTest, FinalizeWritesOnePartPerPhase) {
  SessionOptions o;
  o.path = tempPath("parts");
  SessionId id = mgr().start(o).value().id;
  enter("x");
  exit("x");
  ASSERT_TRUE(mgr().advancePhase(id).isOk());
  std::vector<std::string> written;
  ASSERT_TRUE(mgr().finalize(id, "hatchet_msgpack", &written).isOk());
  EXPECT_EQ(written, (std::vector<std::string>{o.path + ".part_0.hatchet_msgpack",
                                               o.path + ".part_1.hatchet_msgpack"}));
  std::ifstream in(written[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(bytes.substr(0, 2), "\x92\x84");  // [root, devices]; root has 4 keys
  EXPECT_NE(bytes.find("\xa1x"), std::string::npos);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool fileExists(const std::string &path) { return std::ifstream(path).good(); }

TEST(SessionManagerTest, PeriodicFlushingWritesEachCompletePhaseAtAdvanceAndFreesIt) {
  SessionOptions o;
  o.path = tempPath("periodic");
  o.mode = parseModeSpec("periodic_flushing:format=hatchet").value();
  SessionId id = mgr().start(o).value().id;
  enter("step0");
  exit("step0");
  ASSERT_EQ(mgr().advancePhase(id).value(), PhaseId{1});
  // Phase 0 had no device work: complete, so written by advancePhase itself and freed.
  std::string part0 = readFile(o.path + ".part_0.hatchet");
  EXPECT_NE(part0.find("\"name\":\"step0\""), std::string::npos);
  EXPECT_NE(part0.find("\"mode\":\"periodic_flushing:format=hatchet\""), std::string::npos);
  EXPECT_EQ(mgr().serialize(id, PhaseId{0}, "hatchet").status().code(), StatusCode::kNotFound);
  enter("step1");
  exit("step1");
  std::vector<std::string> written;
  // finalize's format does not change the parts' format: one run, one format.
  ASSERT_TRUE(mgr().finalize(id, "hatchet_msgpack", &written).isOk());
  EXPECT_EQ(written,
            (std::vector<std::string>{o.path + ".part_0.hatchet", o.path + ".part_1.hatchet"}));
  std::string part1 = readFile(o.path + ".part_1.hatchet");
  EXPECT_NE(part1.find("\"name\":\"step1\""), std::string::npos);
  EXPECT_EQ(part1.find("step0"), std::string::npos);
}

TEST(SessionManagerTest, PeriodicFlushingWithOnePhaseStillWritesAPartFile) {
  SessionOptions o;
  o.path = tempPath("periodic_one");
  o.mode = parseModeSpec("periodic_flushing").value();
  SessionId id = mgr().start(o).value().id;
  std::vector<std::string> written;
  ASSERT_TRUE(mgr().finalize(id, "", &written).isOk());
  EXPECT_EQ(written, (std::vector<std::string>{o.path + ".part_0.hatchet"}));
}

TEST(SessionManagerTest, PeriodicFlushingOptionsAreChecked) {
  SessionOptions o;
  o.path = tempPath("periodic_bad");
  o.mode = parseModeSpec("periodic_flushing:format=chrome_trace").value();
  Result<StartResult> r = mgr().start(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  o.mode = parseModeSpec("periodic_flushing:every=10").value();
  EXPECT_EQ(mgr().start(o).status().message(),
            "[PROTON] Unknown option 'every' for mode 'periodic_flushing'. Allowed options: "
            "format");
  o.mode = parseModeSpec("periodic_flushing:format=chrome_trace").value();
  o.data = DataKind::kTrace;  // trace data writes trace parts
  SessionId id = mgr().start(o).value().id;
  std::vector<std::string> written;
  ASSERT_TRUE(mgr().finalize(id, "", &written).isOk());
  EXPECT_EQ(written, (std::vector<std::string>{o.path + ".part_0.chrome_trace"}));
}

TEST(SessionManagerTest, RankFromTheEnvironmentNamesTheFileAndTheMetadata) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  SessionOptions o;
  o.path = tempPath("ranked");
  Result<StartResult> r = mgr().start(o);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  ASSERT_TRUE(r.isOk());
  std::vector<std::string> written;
  ASSERT_TRUE(mgr().finalize(r.value().id, "", &written).isOk());
  EXPECT_EQ(written, (std::vector<std::string>{o.path + ".rank1.hatchet"}));
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_NE(
      readFile(written[0])
          .find("\"phase\":0,\"rank\":1,\"world_size\":2,\"host\":\"" + std::string(host) + "\","),
      std::string::npos);
  EXPECT_FALSE(fileExists(o.path + ".hatchet"));
}

// A profile's stats table counts what was lost while its session ran, not earlier sessions'
// losses (a second session's profile showed the first one's unmatched scopes).
TEST(SessionManagerTest, AProfileCountsTheLossesOfItsOwnSessionOnly) {
  Counter &lost = Stats::global().counter("test_losses_per_session");
  lost.add(7);
  SessionOptions o;
  o.path = tempPath("own_losses");
  Result<StartResult> r = mgr().start(o);
  ASSERT_TRUE(r.isOk());
  lost.add(2);
  std::vector<std::string> written;
  ASSERT_TRUE(mgr().finalize(r.value().id, "", &written).isOk());
  ASSERT_EQ(written.size(), 1u);
  EXPECT_NE(readFile(written[0]).find("\"test_losses_per_session\":2"), std::string::npos);
}

// Runs child() in a forked process; its return value is the exit code. A child that
// deadlocks dies of SIGALRM after 10 s instead of hanging the test.
int inForkedChild(const std::function<int()> &child) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    _exit(child());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SessionManagerTest, ForkedChildStartsWithoutTheParentsSessionsAndCanProfileItself) {
  ScopedSession parent("fork_parent");
  enter("before_fork");
  std::string childPath = tempPath("fork_child");
  int code = inForkedChild([&] {
    if (!mgr().liveSessions().empty()) return 1;
    if (!mgr().exitScope(std::nullopt, {}).isOk()) return 2;  // profiling is off: a no-op
    SessionOptions o;
    o.path = childPath;
    Result<StartResult> r = mgr().start(o);
    if (!r.isOk() || r.value().id != SessionId{0}) return 3;
    if (!mgr().enterScope(S("in_child"), false, nullptr).isOk()) return 4;
    if (!mgr().exitScope(S("in_child"), {}).isOk()) return 5;
    std::vector<std::string> written;
    if (!mgr().finalize(std::nullopt, "", &written).isOk()) return 6;
    return written == std::vector<std::string>{childPath + ".hatchet"} ? 0 : 7;
  });
  EXPECT_EQ(code, 0);
  exit("before_fork");
  // The child wrote only its own scope; the parent's session is untouched by the child.
  std::string child = readFile(childPath + ".hatchet");
  EXPECT_NE(child.find("\"in_child\""), std::string::npos);
  EXPECT_EQ(child.find("before_fork"), std::string::npos);
  EXPECT_EQ(tree(parent.id), N("ROOT", "", {N("before_fork")}));
}

TEST(SessionManagerTest, ForkWhileOtherThreadsInternAndCountNeverDeadlocksTheChild) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 2; ++t)
    busy.emplace_back([&, t] {
      for (uint64_t i = 0; !stop.load(); ++i) {
        StringTable::global().intern("busy_" + std::to_string(t) + "_" + std::to_string(i));
        Stats::global().counter("busy_counter_" + std::to_string(t)).add();
      }
    });
  for (int round = 0; round < 20; ++round) {
    int code = inForkedChild([] {
      StringId id = StringTable::global().intern("fresh_in_child");
      Stats::global().counter("child_counter").add();
      return StringTable::global().view(id) == "fresh_in_child" ? 0 : 1;
    });
    ASSERT_EQ(code, 0) << "round " << round;
  }
  stop = true;
  for (auto &t : busy) t.join();
}

TEST(SessionManagerTest, FormatErrors) {
  ScopedSession s("formats");
  EXPECT_EQ(mgr().serialize(s.id, PhaseId{0}, "chrome_trace").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(mgr().finalize(s.id, "bogus", nullptr).message(),
            "[PROTON] Unknown output format: 'bogus'. Allowed values: hatchet, hatchet_msgpack, "
            "chrome_trace");
  EXPECT_EQ(mgr().finalize(s.id, "chrome_trace", nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(mgr().depth(s.id).isOk());  // still live after the refused finalize
}

TEST(SessionManagerTest, TraceDataRecordsScopeEventsWithTheirCallStack) {
  ScopedSession s("trace", DataKind::kTrace);
  enter("outer");
  enter("inner");
  exit("inner");
  exit("outer");
  Result<std::string> json = mgr().serialize(s.id, PhaseId{0}, "");
  ASSERT_TRUE(json.isOk());
  // Scopes are numbered in the order they are written: the inner one ends first.
  EXPECT_NE(
      json.value().find("\"args\":{\"call_stack\":[\"ROOT\",\"outer\",\"inner\"],\"scope_id\":0}"),
      std::string::npos);
  EXPECT_NE(json.value().find("\"args\":{\"call_stack\":[\"ROOT\",\"outer\"],\"scope_id\":1}"),
            std::string::npos);
}

TEST(SessionManagerTest, NewThreadInheritsTheMainThreadStack) {
  ScopedSession s("inherit");
  enter("outer");
  size_t threadDepth = 0;
  std::thread worker([&] {
    threadDepth = mgr().depth(s.id).value();
    enter("inner");
    exit("inner");
  });
  worker.join();
  exit("outer");
  EXPECT_EQ(threadDepth, 1u);
  EXPECT_EQ(tree(s.id), N("ROOT", "", {N("outer", "", {N("inner")})}));
}

TEST(SessionManagerTest, ManyThreadsGiveExactCounts) {
  ScopedSession s("threads");
  constexpr int kThreads = 8;
  constexpr int kScopes = 10000;
  // Create work/t0..t7 up front, so their order in the tree does not depend on scheduling.
  enter("work");
  for (int t = 0; t < kThreads; ++t) {
    enter("t" + std::to_string(t));
    exit("t" + std::to_string(t));
  }
  exit("work");
  auto entry = std::make_shared<const MetricList>(MetricList{M("entered", int64_t{1})});
  MetricList atExit{M("exited", int64_t{1})};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StringId mine = S("t" + std::to_string(t));
      for (int i = 0; i < kScopes; ++i) {
        bool ok = mgr().enterScope(S("work"), false, entry).isOk();
        ok = mgr().enterScope(mine, false, entry).isOk() && ok;
        ok = mgr().exitScope(std::nullopt, atExit).isOk() && ok;
        ok = mgr().exitScope(S("work"), atExit).isOk() && ok;
        if (!ok) failures.fetch_add(1);
      }
    });
  }
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<std::string> perThread;
  for (int t = 0; t < kThreads; ++t)
    perThread.push_back(N("t" + std::to_string(t), "\"entered\":10000,\"exited\":10000"));
  EXPECT_EQ(tree(s.id), N("ROOT", "\"entered\":0,\"exited\":0",
                          {N("work", "\"entered\":80000,\"exited\":80000", perThread)}));
}

}  // namespace
}  // namespace proton
