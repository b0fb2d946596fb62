// Backward attribution: the threads a framework runs its backward pass on (PyTorch's autograd
// engine threads, named pt_autograd_<device>) file their work under the context of the thread
// that asked for the pass (its scopes, its call stack down to the backward() call), as if it
// had launched the kernels itself.
//
//   BackwardToken token = enterBackward(ThreadContext::current().capture(), callerStack);
//   ... the engine runs the graph on its worker threads ...
//   exitBackward(token);
//
// How a worker borrows the context, cheaply: enterBackward publishes an immutable snapshot and
// bumps a serial. Every thread compares the serial with the one it last followed on each touch
// of its context (one relaxed load; ThreadContext::resetIfStale). On a change a worker adopts
// the snapshot, once per backward pass, under this file's mutex; its launches then take no
// lock and allocate nothing. A thread is a worker when its OS name starts with one of the
// prefixes a framework adapter registered (setBackwardWorkerPrefixes), read once per thread.
// A worker with scopes of its own open (a custom backward that entered one) adopts when they
// have closed. Passes that run at the same time from several threads: workers follow the one
// entered last (PyTorch does not say which caller a worker serves).
//
// Threading: all functions are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "context/python_context.h"

namespace proton {

class ThreadContext;
struct ContextSnapshot;

using BackwardToken = uint64_t;

// The serial workers compare with; changes on every enterBackward and exitBackward.
extern std::atomic<uint64_t> gBackwardSerial;

// Publishes the caller's context for the workers; callerStack (may be null) is its call stack
// at the backward() call, the outer part of every worker stack.
BackwardToken enterBackward(std::shared_ptr<const ContextSnapshot> snapshot,
                            const PythonStack *callerStack);
void exitBackward(BackwardToken token);
// Number of passes published now (for tests).
size_t backwardsInFlight();

// Threads whose name starts with one of these are backward workers. Replaces earlier ones.
void setBackwardWorkerPrefixes(std::vector<std::string> prefixes);
// Marks the calling thread a worker (or not) whatever its name; for tests and for frameworks
// whose worker threads carry no name.
void setBackwardWorker(bool worker);

// Around fork() (runtime/fork_safety.cc; a leaf lock). The child has no pass in flight.
void lockBackwardsForFork();
void unlockBackwardsAfterFork(bool inChild);

// ThreadContext's slow path when gBackwardSerial moved (t.lock held).
void followBackwardSlow(ThreadContext &t, uint64_t serial);

// The stack a launch of t files under: the borrowed caller stack, then own (either may be null).
const PythonStack *withBorrowedStack(const ThreadContext &t, const PythonStack *own);

}  // namespace proton
