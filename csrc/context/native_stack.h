// Native call stacks for context="native": the calling thread's C/C++ stack, unwound and
// symbolised, as the context of each launch and scope, for programs with no annotations.
//
//   const PythonStack *s = captureNativeStack();  // launch path; frames outermost first
//   for (StringId f : s->frames) ...              // "function (module+0xoffset)"
//
// Stacks use the interned stack type of the Python context (python_context.h): a stack is an
// immutable list of interned frame names, and equal stacks are one object.
//
// What a frame is: the function that contains the call site (demangled; from the module's ELF
// symbol table, .symtab or else .dynsym, so static functions of an executable built without
// -rdynamic still get names) and the call site's offset in its module, so two call sites in
// one function are two frames (as file:line is for Python). Frames are left out:
// - innermost ones inside Proton, CUPTI, the CUDA driver or runtime (libproton, libcupti,
//   libcuda, libcudart, functions named cuda*/__cuda*/cudart::*/__device_stub*/nvtx*,
//   proton::*, proton_*): what called the launch is the context, not how it was made;
// - outermost ones of the C and C++ libraries, `_start`, and Proton's (process and thread
//   start-up).
// A kernel launched with <<<...>>> has nvcc's host wrapper, named after the kernel, as its
// innermost frame.
// A stack deeper than kMaxNativeFrames keeps its innermost frames under one frame named
// "[truncated]" (stat native_stacks_truncated).
//
// Threading and cost: thread-safe. The fast path (a stack this thread saw recently) unwinds,
// hashes the return addresses twice and looks them up in a thread-local cache: no lock of ours,
// no allocation. On x86-64 Linux the unwind walks the stack with DWARF-CFI rules cached per
// thread and per return address (cfi_unwind.h), a few ns a frame, and gives libgcc's
// addresses; libgcc's _Unwind_Backtrace, which finds and runs the CFI of every frame again on
// every unwind (some 150 ns a frame; lock-free with glibc 2.35+ and libgcc 12+), unwinds
// stacks with a frame the cached rules do not model, on other platforms, and all stacks under
// PROTON_NATIVE_UNWINDER=libgcc. A new stack asks the dynamic loader where its new addresses
// lie (dladdr) without holding our lock, then takes one mutex to symbolise and intern it.
// Never throws.
//
// Caches are kept for the life of the process: a library unloaded (dlclose) and another
// loaded at the same address would show the first one's names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "context/python_context.h"

namespace proton {

constexpr size_t kMaxNativeFrames = 128;

// nullptr only when nothing could be unwound at all. toInterpreter: the unwind ends at the
// innermost frame in the Python interpreter's code, kept (isInterpreterModule); for stacks of
// which only the C/C++ frames below the interpreter are used (belowInterpreter), it saves
// unwinding the interpreter's frames and those above them.
const PythonStack *captureNativeStack(bool toInterpreter = false) noexcept;

// Whether a module (its file's name, no directory) is the Python interpreter: libpython, or
// a python executable.
bool isInterpreterModule(std::string_view file);
// Whether the interpreter's code was found when Proton was loaded (unwinds can stop there).
bool nativeStacksStopAtInterpreter();

// The frame name of the call whose return address is `returnAddress` ("main (app+0x1a2b)");
// "?? (module+0xoffset)" when no symbol covers it, "?? (0xaddress)" outside any module.
std::string nativeFrameName(uintptr_t returnAddress);

// Around fork() (runtime/fork_safety.cc): taken before the Python stack table's lock and the
// string table's (a new stack takes them while holding this one).
void lockNativeStacksForFork();
void unlockNativeStacksAfterFork(bool inChild);

}  // namespace proton
