// The return addresses on the calling thread's stack, for native stacks (native_stack.h): the
// same addresses libgcc's _Unwind_Backtrace gives, found at a fraction of its cost on x86-64
// Linux by a DWARF-CFI unwinder that caches one unwind rule per return address.
//
//   uintptr_t pcs[64];
//   size_t n = unwindPcs(pcs, 64, nullptr, defaultUnwindMethod());
//   // pcs[0]: the call of unwindPcs; pcs[1..n-1]: the calls of its callers, innermost first
//
// How the cached unwinder works (UnwindMethod::kCachedCfi): libgcc finds the FDE and runs the
// CIE's and the FDE's CFA programs again for every frame of every unwind. Most x86-64 frames
// need only three facts: where the CFA is (rsp or rbp plus an offset; for a function that
// realigns its stack, the word at rbp minus an offset), where the return address is (at
// CFA-8) and whether rbp was saved (at CFA, or rbp, plus an offset). Those are worked out once
// per return address from the module's .eh_frame (found with glibc's _dl_find_object, or
// dl_iterate_phdr where glibc is older than 2.35) and kept in a thread-local direct-mapped
// table; the walk then reads two or three words of stack per frame. Memory is read only
// inside the thread's stack (pthread_getattr_np, once per thread). A frame whose rule is not
// modelled (any other CFA expression, a CFA in another register, rbp or the return address
// kept anywhere else, a signal frame, a code address no FDE covers) or any address outside
// the stack makes it redo the whole unwind with libgcc: the result is libgcc's either way
// (cachedCfiFallbacks counts how often). Elsewhere than x86-64 Linux, libgcc does it all.
//
// Threading: thread-safe; each thread has its own rule table and stack bounds. A thread's
// first unwind allocates its table (64 KiB, freed when the thread ends) and reads its stack's
// bounds; a rule missing from the table is parsed with no lock of ours (dl_iterate_phdr takes
// the loader's lock on glibc < 2.35). After that an unwind takes no lock and allocates
// nothing. Never throws. Rules are kept for the life of the thread: a library unloaded
// (dlclose) and another loaded at the same address would be unwound by the first one's rules
// (reads stay inside the stack; the addresses may be wrong), as native_stack.h's caches keep
// its names.
#pragma once

#include <cstddef>
#include <cstdint>

namespace proton {

// Code address ranges [begin, end): an unwind ends at its first frame inside one of them.
struct CodeRanges {
  static constexpr size_t kMax = 8;
  uintptr_t begin[kMax] = {}, end[kMax] = {};
  size_t n = 0;
  bool contains(uintptr_t pc) const {
    for (size_t i = 0; i < n; ++i)
      if (pc >= begin[i] && pc < end[i]) return true;
    return false;
  }
};

enum class UnwindMethod : uint8_t {
  kCachedCfi,  // x86-64 Linux; libgcc for the stacks it cannot model
  kLibgcc,     // _Unwind_Backtrace for every unwind
};

// kCachedCfi on x86-64 Linux unless the environment has PROTON_NATIVE_UNWINDER=libgcc (read
// once, when Proton is loaded); kLibgcc elsewhere.
UnwindMethod defaultUnwindMethod();

// Writes at most `capacity` code addresses into pcs and returns how many: pcs[0] is the call
// of unwindPcs in its caller, then the call sites of the callers above it (each a return
// address minus one, or the interrupted instruction above a signal frame), innermost first.
// The unwind ends at the outermost frame, at the first address inside `stopAt` (kept) when
// given, or when pcs is full. Both methods give the same addresses from the same place.
// Never inlined: its own frame is where the unwind starts.
__attribute__((noinline)) size_t unwindPcs(uintptr_t *pcs, size_t capacity,
                                           const CodeRanges *stopAt, UnwindMethod method) noexcept;

// How many kCachedCfi unwinds, in the whole process, were redone with libgcc. Not a stat of
// the profile: nothing is lost by a fallback, it only costs what kLibgcc costs.
uint64_t cachedCfiFallbacks();

// For tests: the start of the .eh_frame_hdr section of the module that holds `pc`, as
// _dl_find_object finds it (nullptr where glibc lacks it) and as dl_iterate_phdr does;
// nullptr when no module holds pc or it has none.
const void *ehFrameHeaderByFindObject(uintptr_t pc);
const void *ehFrameHeaderByPhdrs(uintptr_t pc);

}  // namespace proton
