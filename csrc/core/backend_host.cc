#include "core/backend_host.h"

#include <atomic>

namespace proton {
namespace {

// Before the runtime installs its host: no session, so nothing to attribute.
class NoSessions final : public BackendHost {
 public:
  bool profilingOn() const override { return false; }
  bool traceLive() const override { return false; }
  size_t launchContext(LaunchEntry *, size_t, uint64_t *threadId, StringId *launchName) override {
    if (threadId) *threadId = 0;
    if (launchName) *launchName = StringId{};
    return 0;
  }
  void endLaunch(const LaunchEntry *, size_t, bool) override {}
  void captureContext(CaptureContext &out, bool) override { out = CaptureContext{}; }
  Status enterRange(StringId) override { return {}; }
  Status exitRange(StringId) override {
    return {StatusCode::kScopeMismatch, "[PROTON] no scope is open"};
  }
};

NoSessions gNoSessions;
std::atomic<BackendHost *> gHost{&gNoSessions};

}  // namespace

BackendHost &BackendHost::get() { return *gHost.load(std::memory_order_acquire); }

void BackendHost::install(BackendHost *host) {
  gHost.store(host ? host : &gNoSessions, std::memory_order_release);
}

}  // namespace proton
