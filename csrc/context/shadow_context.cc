#include "context/shadow_context.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

#include "core/fork_lock.h"

namespace proton {
namespace {

// Guards mainThread: read when a thread first creates its context, cleared when it exits.
std::mutex mainMu;
ThreadContext *mainThread = nullptr;

}  // namespace

ThreadContext::ThreadContext() : threadId(static_cast<uint64_t>(syscall(SYS_gettid))) {
  std::lock_guard guard(mainMu);
  if (mainThread == nullptr) return;
  std::lock_guard mainGuard(mainThread->lock);
  frames = mainThread->frames;
  mirrors = mainThread->mirrors;
  generation = mainThread->generation;
  borrowedDepth = frames.size();  // inherited, so a backward pass it runs may replace them
}

std::shared_ptr<const ContextSnapshot> ThreadContext::capture() {
  auto snapshot = std::make_shared<ContextSnapshot>();
  std::lock_guard guard(lock);
  snapshot->frames = frames;
  snapshot->mirrors = mirrors;
  snapshot->generation = generation;
  snapshot->modulePath = modulePath;
  return snapshot;
}

void ThreadContext::adopt(const ContextSnapshot &snapshot) {
  std::lock_guard guard(lock);
  frames = snapshot.frames;
  mirrors = snapshot.mirrors;
  generation = snapshot.generation;
  modulePath = snapshot.modulePath;
  borrowedDepth = frames.size();
  borrowedStack = nullptr;
  state = StringId{};
}

ThreadContext::~ThreadContext() {
  std::lock_guard guard(mainMu);
  if (mainThread == this) mainThread = nullptr;
}

ThreadContext &ThreadContext::current() {
  thread_local ThreadContext context;
  return context;
}

void ThreadContext::lockRegistryForFork() { mainMu.lock(); }
void ThreadContext::unlockRegistryAfterFork(bool inChild) { releaseAfterFork(mainMu, inChild); }

void ThreadContext::afterForkInChild() {
  ThreadContext &self = current();
  self.mirrors.clear();
  self.launchPending = false;
  self.launchInFlight = false;
  std::lock_guard guard(mainMu);
  mainThread = &self;
}

void ThreadContext::registerMainThread() {
  ThreadContext &self = current();
  std::lock_guard guard(mainMu);
  mainThread = &self;
}

}  // namespace proton
