#include "runtime/fork_safety.h"

#include <pthread.h>

#include <mutex>

#include "context/backward_borrow.h"
#include "context/native_stack.h"
#include "context/python_context.h"
#include "context/shadow_context.h"
#include "core/device_info.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

// Taken in the order they nest: the native stack table's lock is held while the Python stack
// table's, the string table's and the stats table's are taken; every other lock here is a
// leaf (nothing else is taken or awaited while it is held). So taking them in this order
// cannot deadlock with any other thread.
void beforeFork() {
  ThreadContext::lockRegistryForFork();
  lockNativeStacksForFork();
  lockPythonStacksForFork();
  StringTable::global().lockForFork();
  Stats::global().lockForFork();
  DeviceTable::global().lockForFork();
  lockBackwardsForFork();
}

void unlockAll(bool inChild) {
  unlockBackwardsAfterFork(inChild);
  DeviceTable::global().unlockAfterFork(inChild);
  Stats::global().unlockAfterFork(inChild);
  StringTable::global().unlockAfterFork(inChild);
  unlockPythonStacksAfterFork(inChild);
  unlockNativeStacksAfterFork(inChild);
  ThreadContext::unlockRegistryAfterFork(inChild);
}

void afterForkInParent() { unlockAll(false); }

void afterForkInChild() {
  unlockAll(true);
  Stats::global().resetAll();
  ThreadContext::afterForkInChild();
  SessionManager::afterForkInChild();
}

}  // namespace

void installForkHandlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(beforeFork, afterForkInParent, afterForkInChild); });
}

}  // namespace proton

namespace proton {
namespace {
// Also at load time, so a fork before the first session is just as safe.
[[maybe_unused]] const bool kInstalledAtLoad = (installForkHandlers(), true);
}  // namespace
}  // namespace proton
