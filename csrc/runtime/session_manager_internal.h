// Helpers the session manager's source files share (session_manager.cc, the scope and
// state calls in session_manager_scopes.cc). Internal to csrc/runtime/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "context/python_context.h"
#include "context/shadow_context.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::detail {

// Chains scope names into MirrorEntry::pathHash (never 0 for a non-empty path).
uint64_t chainHash(uint64_t parent, StringId name);
// ROOT/<frames of stack>/<names of entries[0..n)>/[extra]/[detail]: the node of a
// Python-context path.
NodeId resolvePythonPath(Session &s, PhaseId phase, const PythonStack *stack,
                         const MirrorEntry *entries, size_t n, StringId extra, StringId detail = {},
                         bool trailingFrames = true);
// Calls emit(name) for ROOT's path through a stack and entries (ScopeFrame or MirrorEntry),
// outermost first: each entry spliced between the stack's frames at its spliceDepth, an entry
// of unknown depth (-1) as deep as it can go before the next known one (the user's scopes and
// operators: after every frame open, as context="python" always filed scopes).
// trailing: also the stack's frames below the last entry (a launch's path); without them, the
// path of the last entry itself.
template <typename Entry, typename Emit>
void splicePath(const PythonStack *stack, const Entry *entries, size_t n, Emit &&emit,
                bool trailing = true) {
  size_t len = stack ? stack->frames.size() : 0, pos = 0;
  for (size_t i = 0, next = 0; i < n; ++i) {
    size_t target;
    if (entries[i].spliceDepth >= 0) {
      target = static_cast<size_t>(entries[i].spliceDepth);
    } else {
      if (next <= i) {
        next = i + 1;
        while (next < n && entries[next].spliceDepth < 0) ++next;
      }
      target = next < n ? static_cast<size_t>(entries[next].spliceDepth) : len;
    }
    if (target > len) target = len;
    while (pos < target) emit(stack->frames[pos++]);
    emit(entries[i].name);
  }
  if (trailing || n == 0)
    while (pos < len) emit(stack->frames[pos++]);
}

// Sessions whose context starts with a call stack (context="python" or "native").
inline bool usesCallStack(const Session &s) { return s.options().context != ContextKind::kShadow; }
inline bool usesFramework(const Session &s) { return s.options().sources.framework; }
// A scope or framework frame's place among the Python frames (MirrorEntry::spliceDepth): only
// sessions that splice framework frames between Python frames place scopes by their entry's
// stack; context="python" alone files scopes after every frame, as it always did.
inline int32_t scopeSpliceDepth(const Session &s, const PythonStack *entryStack) {
  if (!usesFramework(s) || s.options().context != ContextKind::kPython || !entryStack) return -1;
  return static_cast<int32_t>(entryStack->frames.size());
}

// The kind of call stack a session's launches are filed under; sessions of two kinds cannot
// run at once (the launch path captures one stack for all of them).
enum class StackKind { kNone, kPython, kNative, kPythonNative, kNativeBelow };
inline StackKind stackKindOf(const SessionOptions &o) {
  const ContextSources &c = o.sources;
  if (c.shadowOnly())  // options built in C++ without the parser
    return o.context == ContextKind::kPython   ? StackKind::kPython
           : o.context == ContextKind::kNative ? StackKind::kNative
                                               : StackKind::kNone;
  if (c.python && c.native) return StackKind::kPythonNative;
  if (c.python) return StackKind::kPython;
  if (c.native) return c.framework ? StackKind::kNativeBelow : StackKind::kNative;
  return StackKind::kNone;
}

}  // namespace proton::detail
