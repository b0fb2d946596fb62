#include "context/shadow_context.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

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
}

ThreadContext::~ThreadContext() {
  std::lock_guard guard(mainMu);
  if (mainThread == this) mainThread = nullptr;
}

ThreadContext &ThreadContext::current() {
  thread_local ThreadContext context;
  return context;
}

void ThreadContext::registerMainThread() {
  ThreadContext &self = current();
  std::lock_guard guard(mainMu);
  mainThread = &self;
}

}  // namespace proton
