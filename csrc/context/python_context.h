// Python call stacks for context="python": interned stacks of frame names and the hook that
// captures the calling thread's stack. The core never includes Python.h: the proton._C module
// registers the CPython frame walker (cpython_frames.cc) here at import, and C++ tests may
// register a fake one.
//
//   setPythonStackCapture(&myWalker);                 // once, at module import
//   const PythonStack *s = capturePythonStack();      // launch path: frames, outermost first
//   for (StringId f : s->frames) ...                  // "file:line@function"
//
// Interned stacks are immutable and never freed, so a pointer identifies a stack for the life
// of the process (like a StringId). internPythonStack is thread-safe (one mutex, taken only
// when a walker meets a stack it has not cached); capturePythonStack takes no lock.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace proton {

struct PythonStack {
  std::vector<StringId> frames;  // outermost first
  uint64_t hash = 0;             // of frames; equal stacks share one object
};

// Returns the calling thread's stack, or nullptr when it has none (a native thread, no
// interpreter). Must not throw and must not block on anything the launch path holds.
using PythonStackCapture = const PythonStack *(*)() noexcept;

void setPythonStackCapture(PythonStackCapture capture);
// nullptr when no walker is registered or the thread has no Python frames.
const PythonStack *capturePythonStack() noexcept;
// The one immutable stack with these frames.
// Around fork() (runtime/fork_safety.cc): the stack table's lock, so the child never inherits it
// held by a thread that does not exist there.
void lockPythonStacksForFork();
void unlockPythonStacksAfterFork(bool inChild);
const PythonStack *internPythonStack(const std::vector<StringId> &frames);
// The empty stack (no frames), a valid stack pointer.
const PythonStack *emptyPythonStack();

}  // namespace proton
