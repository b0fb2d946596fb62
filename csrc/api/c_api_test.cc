// proton/proton.h (the C ABI and its C++ layer) against the CPU path: scopes, metrics, states,
// threads, errors, and the command line's ownership of session 0. The session manager is a
// process-wide singleton: every test finalizes what it starts.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "api/injection.h"
#include "core/stats.h"
#include "proton/proton.h"

namespace {

std::string tempPath(const std::string &name) {
  static const std::string dir = [] {
    std::string tmpl = ::testing::TempDir() + "proton_api_XXXXXX";
    char *made = mkdtemp(tmpl.data());
    return std::string(made ? made : "/tmp");
  }();
  return dir + "/" + name;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string node(const std::string &name, const std::string &metrics,
                 const std::string &children = "") {
  return "{\"frame\":{\"name\":\"" + name + "\",\"type\":\"function\"},\"metrics\":{" + metrics +
         "},\"children\":[" + children + "]}";
}

uint64_t stat(const std::string &name) {
  for (const auto &[n, v] : proton::Stats::global().snapshot())
    if (n == name) return v;
  return 0;
}

TEST(CApiTest, ScopeGuardsFileMetricsUnderNestedScopes) {
  std::string path = tempPath("guards");
  int id = proton::start(path);
  {
    PROTON_SCOPE("outer");
    EXPECT_EQ(proton::depth(id), 1);
    {
      PROTON_SCOPE_METRICS("inner", {{"flops", 2e9}, {"bytes", 4096}, {"dtype", "fp16"}});
      EXPECT_EQ(proton::depth(id), 2);
    }
    PROTON_SCOPE_METRICS("inner", {{"flops", 1e9}, {"bytes", 1024}});
  }
  EXPECT_EQ(proton::depth(id), 0);
  proton::finalize(id);
  std::string json = readFile(path + ".hatchet");
  EXPECT_NE(json.find(node("outer", "",
                           node("inner", "\"flops\":3e+09,\"bytes\":5120,\"dtype\":\"fp16\""))),
            std::string::npos)
      << json;
}

TEST(CApiTest, ManualScopesCheckTheNameAndThrowOnMismatch) {
  std::string path = tempPath("manual");
  int id = proton::start(path);
  proton::enter_scope("a", {{"n", 1}});
  try {
    proton::exit_scope("b");
    ADD_FAILURE() << "exit_scope(\"b\") inside \"a\" did not throw";
  } catch (const proton::Error &e) {
    EXPECT_NE(std::string(e.what()).find("[PROTON]"), std::string::npos) << e.what();
  }
  proton::exit_scope("a", {{"m", 2}});
  proton::enter_scope("c");
  proton::exit_scope();  // the innermost, whatever its name
  proton::finalize(id);
  std::string json = readFile(path + ".hatchet");
  EXPECT_NE(json.find(node("a", "\"n\":1,\"m\":2")), std::string::npos) << json;
  EXPECT_NE(json.find(node("c", "")), std::string::npos) << json;
}

TEST(CApiTest, StateTagsTheScopesEnteredUnderIt) {
  std::string path = tempPath("state");
  int id = proton::start(path);
  {
    PROTON_STATE("warmup");
    PROTON_SCOPE_METRICS("step", {{"n", 1}});
  }
  PROTON_SCOPE_METRICS("step", {{"n", 10}});
  proton::finalize(id);
  std::string json = readFile(path + ".hatchet");
  // The state is appended to the context: step (untagged) and step/warmup.
  EXPECT_NE(json.find(node("step", "\"n\":10", node("warmup", "\"n\":1"))), std::string::npos)
      << json;
}

TEST(CApiTest, ThreadsFileUnderTheirOwnScopes) {
  std::string path = tempPath("threads");
  int id = proton::start(path);
  auto work = [](const char *name, int n) {
    for (int i = 0; i < n; ++i) PROTON_SCOPE_METRICS(name, {{"calls", 1}});
  };
  std::thread a(work, "thread_a", 100), b(work, "thread_b", 50);
  a.join();
  b.join();
  proton::finalize(id);
  std::string json = readFile(path + ".hatchet");
  EXPECT_NE(json.find(node("thread_a", "\"calls\":100")), std::string::npos) << json;
  EXPECT_NE(json.find(node("thread_b", "\"calls\":50")), std::string::npos) << json;
}

TEST(CApiTest, GuardEnteredBeforeAStartIsNotExitedIntoTheNewProfile) {
  uint64_t errorsBefore = stat("api_scope_errors");
  std::string path = tempPath("generation");
  int id = -1;
  {
    PROTON_SCOPE("before_start");  // profiling off: nothing recorded, nothing to exit
    id = proton::start(path);
    PROTON_SCOPE("after_start");
    EXPECT_EQ(proton::depth(id), 1);
  }
  EXPECT_EQ(proton::depth(id), 0);
  proton::finalize(id);
  EXPECT_EQ(stat("api_scope_errors"), errorsBefore);
  std::string json = readFile(path + ".hatchet");
  EXPECT_EQ(json.find("before_start"), std::string::npos) << json;
  EXPECT_NE(json.find("after_start"), std::string::npos) << json;
}

TEST(CApiTest, FailedGuardIsCountedNotThrown) {
  std::string path = tempPath("failed_guard");
  int id = proton::start(path);
  uint64_t before = stat("api_scope_errors");
  PROTON_SCOPE_METRICS("typed", {{"x", 1}});
  { PROTON_SCOPE_METRICS("typed_again", {{"x", "a string where an int was"}}); }
  EXPECT_EQ(stat("api_scope_errors"), before + 1);
  EXPECT_NE(std::string(proton_last_error()).find("x"), std::string::npos) << proton_last_error();
  proton_exit_scope("typed", nullptr, 0);
  proton::finalize(id);
}

TEST(CApiTest, CFunctionsReportErrorsWithoutThrowing) {
  EXPECT_EQ(proton_start("x", "shadow", "bogus", "", ""), -1);
  EXPECT_NE(std::string(proton_last_error()).find("bogus"), std::string::npos)
      << proton_last_error();
  EXPECT_EQ(proton_finalize(9999, ""), -1);
  EXPECT_THROW(proton::start("y", proton::Options{"shadow", "tree", "nope", ""}), proton::Error);
  std::string path = tempPath("c_metrics");
  int id = proton_start(path.c_str(), nullptr, nullptr, nullptr, nullptr);
  ASSERT_GE(id, 0) << proton_last_error();
  proton_metric bad{"m", 42, 0, 0.0, nullptr};
  EXPECT_EQ(proton_enter_scope("s", &bad, 1), -1);
  EXPECT_NE(std::string(proton_last_error()).find("unknown kind"), std::string::npos);
  proton_metric good{"m (pty)", PROTON_METRIC_STRING, 0, 0.0, "last"};
  EXPECT_EQ(proton_enter_scope("s", &good, 1), 0);
  EXPECT_EQ(proton_exit_scope(nullptr, nullptr, 0), 0);
  EXPECT_EQ(proton_finalize(id, "hatchet"), 0);
  EXPECT_NE(readFile(path + ".hatchet").find(node("s", "\"m\":\"last\"")), std::string::npos);
}

TEST(CApiTest, CommandLineSessionOwnsStartAndFinalize) {
  std::string path = tempPath("command_line");
  int id = proton::start(path);
  proton::api::setCommandLineSession(id);
  EXPECT_EQ(proton_command_line_session(), id);
  EXPECT_EQ(proton::start("another_name"), id);  // the program's own start is ignored
  proton::finalize();                            // and so is its finalize
  EXPECT_THROW(proton::activate(id + 100), proton::Error);
  { PROTON_SCOPE("still_recording"); }
  proton::api::setCommandLineSession(-1);
  proton::finalize(id);
  EXPECT_NE(readFile(path + ".hatchet").find("still_recording"), std::string::npos);
}

TEST(CApiTest, InjectedOptionsComeFromTheLaunchersEnvironment) {
  std::map<std::string, std::string> vars{{"PROTON_INJECT_NAME", "out/run"},
                                          {"PROTON_INJECT_DATA", "trace"},
                                          {"PROTON_INJECT_MODE", "periodic_flushing"}};
  auto env = [&](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_TRUE(proton::api::launchedByProton(env));
  proton::Result<proton::SessionOptions> options = proton::api::injectedOptions(env);
  ASSERT_TRUE(options.isOk()) << options.status().message();
  EXPECT_EQ(options.value().path, "out/run");
  EXPECT_EQ(options.value().data, proton::DataKind::kTrace);
  EXPECT_EQ(options.value().context, proton::ContextKind::kShadow);
  EXPECT_EQ(options.value().mode.name, "periodic_flushing");
  vars["PROTON_INJECT_CONTEXT"] = "nonsense";
  EXPECT_FALSE(proton::api::injectedOptions(env).isOk());
  vars.clear();
  EXPECT_FALSE(proton::api::launchedByProton(env));
  ASSERT_TRUE(proton::api::injectedOptions(env).isOk());
  EXPECT_EQ(proton::api::injectedOptions(env).value().path, "proton");
}

}  // namespace
