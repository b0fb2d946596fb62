#include "runtime/session_host.h"

#include "runtime/session_manager.h"

namespace proton {
namespace {

class SessionHost final : public BackendHost {
 public:
  bool profilingOn() const override { return SessionManager::global().profilingOn(); }
  bool traceLive() const override { return SessionManager::global().traceLive(); }
  size_t launchContext(LaunchEntry *out, size_t max, uint64_t *threadId,
                       StringId *launchName) override {
    return SessionManager::global().launchContext(out, max, threadId, launchName);
  }
  void endLaunch(const LaunchEntry *entries, size_t n, bool ran) override {
    SessionManager::global().endLaunch(entries, n, ran);
  }
  void captureContext(CaptureContext &out, bool inLaunch) override {
    SessionManager::global().captureContext(out, inLaunch);
  }
  Status enterRange(StringId name) override {
    return SessionManager::global().enterScope(name, false, nullptr);
  }
  Status exitRange(StringId name) override { return SessionManager::global().exitScope(name, {}); }
};

}  // namespace

BackendHost &sessionHost() {
  static SessionHost *host = new SessionHost();  // never destroyed: callbacks may race exit
  return *host;
}

}  // namespace proton
