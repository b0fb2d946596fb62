// Releasing a lock taken before fork() (runtime/fork_safety.cc takes them all, then forks).
//
//   void unlockAfterFork(bool inChild) { releaseAfterFork(mu_, inChild); }
//
// The parent unlocks. The child makes a new lock rather than unlocking: the owner recorded in
// the old one is the parent's thread, which does not exist in the child. Called by the one
// thread that forked, with every other thread's use of the lock shut out by it.
#pragma once

#include <new>

namespace proton {

template <class Mutex>
void releaseAfterFork(Mutex &mu, bool inChild) {
  if (inChild)
    new (&mu) Mutex();
  else
    mu.unlock();
}

}  // namespace proton
