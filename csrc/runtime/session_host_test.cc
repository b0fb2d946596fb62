// The runtime's BackendHost: what a backend asks through core/backend_host.h is answered by
// the process's SessionManager (no GPU: the backends' calls are made here directly).
#include "runtime/session_host.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }

TEST(SessionHost, BackendsAskTheSessionManagerWhereLaunchesBelong) {
  SessionManager &manager = SessionManager::global();  // installs the host
  BackendHost &host = BackendHost::get();
  EXPECT_EQ(&host, &sessionHost());
  EXPECT_FALSE(host.profilingOn());
  LaunchEntry entries[LaunchInfo::kMaxEntries];
  uint64_t thread = 0;
  StringId name;
  EXPECT_EQ(host.launchContext(entries, LaunchInfo::kMaxEntries, &thread, &name), 0u);

  std::string dir = ::testing::TempDir() + "proton_host_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  SessionOptions options;
  options.path = dir + "/host";
  options.data = DataKind::kTrace;
  Result<StartResult> started = manager.start(options);
  ASSERT_TRUE(started.isOk()) << started.status().message();
  EXPECT_TRUE(host.profilingOn());
  EXPECT_TRUE(host.traceLive());
  // An NVTX range is a scope of the thread: a launch inside it is filed under it.
  ASSERT_TRUE(host.enterRange(S("nvtx_range")).isOk());
  size_t n = host.launchContext(entries, LaunchInfo::kMaxEntries, &thread, &name);
  ASSERT_EQ(n, 1u);
  EXPECT_NE(thread, 0u);
  EXPECT_EQ(name, StringId{});  // no launch metadata
  EXPECT_EQ(entries[0].session->id(), started.value().id);
  host.endLaunch(entries, n, /*ran=*/true);
  CaptureContext captured;
  host.captureContext(captured, /*inLaunch=*/false);
  EXPECT_EQ(captured.names, std::vector<StringId>{S("nvtx_range")});
  EXPECT_FALSE(host.exitRange(S("another_range")).isOk());  // not the innermost scope
  EXPECT_TRUE(host.exitRange(S("nvtx_range")).isOk());
  EXPECT_TRUE(manager.finalize(started.value().id, "", nullptr).isOk());
  EXPECT_FALSE(host.profilingOn());
}

}  // namespace
}  // namespace proton
