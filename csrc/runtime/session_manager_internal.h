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
                         const MirrorEntry *entries, size_t n, StringId extra,
                         StringId detail = {});
// Sessions whose context starts with a call stack (context="python" or "native").
inline bool usesCallStack(const Session &s) { return s.options().context != ContextKind::kShadow; }

}  // namespace proton::detail
