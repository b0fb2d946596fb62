// The CPython frame walker behind context="python": captures the calling thread's Python
// stack as interned frames "file:line@function", outermost first. Compiled into proton._C
// only (it includes Python.h); the core sees it through setPythonStackCapture.
//
//   installCPythonFrameWalker({"/site-packages/proton/"}, /*acquireGil=*/true);  // at import
//   const PythonStack *s = capturePythonStack();                                 // any thread
//
// Threading: a thread holding the GIL walks at once. A thread that has a Python thread state
// but released the GIL (torch ops and Triton's launcher release it around the launch) first
// reads its own frames without the GIL (CPython 3.11 to 3.13: nothing else changes them while
// it runs C code) and looks the stack up in its own cache of the stacks it walked; a stack it
// has not seen takes the GIL back for the walk when acquireGil is set, as triton.profiler's
// python context does. A native thread with no thread state never touches the interpreter
// and gets no frames. All
// caches are guarded by the GIL; a walk re-entered from inside a walk (a finalizer run by
// the garbage collector) gets no frames.
//
// Caching: a stack is keyed by its (code object, last instruction) sequence; a hit costs one
// pass over the frames and one table probe, with no string work and no allocation of ours.
// Code objects met are kept alive (so their addresses cannot be reused) with their file and
// function names; past kMaxCodes of them every cache is dropped and refilled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"

namespace proton {

// Frames whose file starts with one of skipPrefixes (the profiler's own), or is one of
// skipFiles exactly (the `proton` launcher's script and runpy), are left out.
void installCPythonFrameWalker(std::vector<std::string> skipPrefixes, bool acquireGil,
                               std::vector<std::string> skipFiles = {});
// The names of the calling thread's stack as the walker files them (GIL held); for tests.
std::vector<std::string> cpythonStackNames();
// The interned stack's address, identifying it (0: none); for tests of the cache.
uintptr_t cpythonStackKey();
// How many of the calling thread's captures found their stack without taking the GIL back
// (CPython 3.11 to 3.13); for tests.
uint64_t cpythonStacksSeenWithoutGil();

}  // namespace proton
