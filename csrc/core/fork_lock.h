// Releasing a lock taken before fork() (runtime/fork_safety.cc takes them all, then forks).
//
//   void unlockAfterFork(bool inChild) { releaseAfterFork(mu_, inChild); }
//
// The parent unlocks. The child makes a new lock rather than unlocking: the owner recorded in
// the old one is the parent's thread, which does not exist in the child. Called by the one
// thread that forked, with every other thread's use of the lock shut out by it.
#pragma once

#include <new>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace proton {

template <class Mutex>
void releaseAfterFork(Mutex &mu, bool inChild) {
  if (inChild) {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer would still see the old lock held (a new one made in its place is not an
    // unlock to it): it is told of an unlock first.
    __tsan_mutex_pre_unlock(&mu, 0);
    __tsan_mutex_post_unlock(&mu, 0);
#endif
    new (&mu) Mutex();
  } else {
    mu.unlock();
  }
}

}  // namespace proton
