// The session manager's framework frames (modules, operators, backward nodes; see
// framework_frames.h), the joined call stacks of combined contexts ("python,native",
// "torch,native"), and the caller's side of backward attribution.
#include <string>

#include "context/native_stack.h"
#include "context/shadow_context.h"
#include "context/stack_join.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/stats.h"
#include "runtime/framework_frames.h"
#include "runtime/session_manager.h"
#include "runtime/session_manager_internal.h"

namespace proton {
using namespace detail;

namespace {

Counter &unmatchedExits() {
  static Counter &counter = Stats::global().counter("framework_frame_exits_unmatched");
  return counter;
}

Counter &scopesClosedByFramework() {
  static Counter &counter = Stats::global().counter("scopes_closed_by_framework_frame");
  return counter;
}

const char *stackKindName(StackKind kind) {
  switch (kind) {
    case StackKind::kPython:
      return "python";
    case StackKind::kNative:
      return "native";
    case StackKind::kPythonNative:
      return "python,native";
    case StackKind::kNativeBelow:
      return "<framework>,native";
    case StackKind::kNone:
      break;
  }
  return "shadow";
}

}  // namespace

const PythonStack *SessionManager::captureJoinedStack() const noexcept {
  const PythonStack *native = belowInterpreter(captureNativeStack(/*toInterpreter=*/true));
  if (!pythonNativeLive()) return native;
  return joinStacks(capturePythonStack(), native);
}

Status SessionManager::checkStackKind(const SessionOptions &options) const {
  StackKind kind = stackKindOf(options);
  if (kind == StackKind::kNone) return {};
  StackKind live = pythonLive()         ? StackKind::kPython
                   : nativeLive()       ? StackKind::kNative
                   : pythonNativeLive() ? StackKind::kPythonNative
                   : nativeBelowLive()  ? StackKind::kNativeBelow
                                        : StackKind::kNone;
  if (live == StackKind::kNone || live == kind) return {};
  return invalidArgument("[PROTON] a context='" + options.sources.name() +
                         "' session cannot run while one whose stacks are '" + stackKindName(live) +
                         "' is live (each launch captures one kind of call stack); finalize the "
                         "one that is running first.");
}

void SessionManager::countContext(const SessionOptions &options, int delta) {
  switch (stackKindOf(options)) {
    case StackKind::kPython:
      pythonLive_.fetch_add(delta, std::memory_order_relaxed);
      break;
    case StackKind::kNative:
      nativeLive_.fetch_add(delta, std::memory_order_relaxed);
      break;
    case StackKind::kPythonNative:
      pythonNativeLive_.fetch_add(delta, std::memory_order_relaxed);
      break;
    case StackKind::kNativeBelow:
      nativeBelowLive_.fetch_add(delta, std::memory_order_relaxed);
      break;
    case StackKind::kNone:
      break;
  }
  if (options.sources.framework) frameworkLive_.fetch_add(delta, std::memory_order_relaxed);
}

bool SessionManager::enterFramework(ThreadContext &t, StringId name, uint8_t kind, bool withDepth) {
  if (!frameworkLive()) return false;
  const PythonStack *stack = withDepth && pythonFramesLive() ? capturePythonStack() : nullptr;
  if (withDepth && pythonFramesLive() && !stack) stack = emptyPythonStack();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  if (stack) stack = withBorrowedStack(t, stack);
  pushFrameworkLocked(t, name, kind, stack);
  return true;
}

void SessionManager::pushFrameworkLocked(ThreadContext &t, StringId name, uint8_t kind,
                                         const PythonStack *stack) {
  // Frames and mirror entries are built where they live: a struct filled on the stack and
  // copied in stalled on store forwarding, a third of this function's time per operator.
  uint32_t depth = static_cast<uint32_t>(t.frames.size());
  ScopeFrame &frame = t.frames.emplace_back();
  frame.name = name;
  frame.beginNs = traceLive() ? monotonicNs() : 0;
  frame.framework = kind;
  frame.spliceDepth = stack ? static_cast<int32_t>(callerDepth(stack)) : -1;
  const int32_t frameSplice = frame.spliceDepth;
  if (kind == static_cast<uint8_t>(FrameworkFrame::kModule)) {
    frame.outerModulePath = t.modulePath;
    t.modulePath = appendFrame(t.modulePath, name);
  }
  for (auto &slot : liveSlots()) {
    Session *s = slot.load(std::memory_order_acquire);
    if (!s || !s->active() || !usesFramework(*s)) continue;
    NodeId parent = refreshMirror(*s, t);
    SessionMirror &m = t.mirror(s->id());
    const uint64_t outerHash = m.entries.empty() ? 0 : m.entries.back().pathHash;
    const PythonStack *outerStack = m.entries.empty() ? nullptr : m.entries.back().stack;
    MirrorEntry &entry = m.entries.emplace_back();
    entry.depth = depth;
    entry.name = name;
    entry.node = kNoNode;
    StackKind stackKind = stackKindOf(s->options());
    // Where the frame goes among the call stack's frames: a module between the Python frames
    // open at its hook; an operator after them all (it runs below the interpreter); with
    // native frames alone, before them (they are the C/C++ code below the interpreter).
    entry.spliceDepth = stackKind == StackKind::kNativeBelow ? 0
                        : stackKind == StackKind::kNone      ? -1
                                                             : frameSplice;
    entry.pathHash = chainHash(outerHash, name) ^ (uint64_t(uint32_t(entry.spliceDepth + 1)) << 33);
    if (usesCallStack(*s) && !stack && s->options().data == DataKind::kTree) {
      // An operator: its node is where its launches go, found at launch with their stack
      // (taking a Python stack per operator costs too much); nothing is filed at the frame.
      entry.node = kRootNode;
    } else if (usesCallStack(*s)) {
      entry.stack = stack ? stack : outerStack;
      NodeId node = resolvePythonPath(*s, m.phase, entry.stack, m.entries.data(), m.entries.size(),
                                      {}, {}, /*trailingFrames=*/false);
      if (node == kNoNode)
        m.entries.pop_back();
      else
        m.entries.back().node = node;
    } else {
      entry.node = mirroredChild(*s, m, parent, name);
      if (entry.node == kNoNode) m.entries.pop_back();
    }
  }
}

void SessionManager::exitFramework(ThreadContext &t) {
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  size_t i = t.frames.size();
  while (i > 0 && t.frames[i - 1].framework == 0) --i;
  if (i == 0) {
    unmatchedExits().add();
    return;
  }
  size_t numTree = 0, numTrace = 0;
  static const MetricList kNone;
  if (t.frames.size() > i) {  // scopes the user left open inside the frame (rare)
    MetricTarget tree[kMaxLiveSessions], trace[kMaxLiveSessions];
    while (t.frames.size() > i) {
      scopesClosedByFramework().add();
      exitScopeLocked(t, kNone, nullptr, nullptr, tree, numTree, trace, numTrace);
    }
  }
  if (t.frames.back().framework == static_cast<uint8_t>(FrameworkFrame::kModule))
    t.modulePath = t.frames.back().outerModulePath;
  // A framework frame carries no tensor metrics: exitScopeLocked files no targets for it (no
  // 2.5 KB of targets built on every operator's exit).
  PROTON_CHECK(!t.frames.back().entryTensors);
  exitScopeLocked(t, kNone, nullptr, nullptr, nullptr, numTree, nullptr, numTrace);
  if (t.borrowedDepth > t.frames.size()) t.borrowedDepth = t.frames.size();
}

const PythonStack *SessionManager::currentModulePath() {
  ThreadContext &t = ThreadContext::current();
  return t.modulePath;  // written by this thread only
}

BackwardToken SessionManager::enterBackward() {
  if (!profilingOn()) return 0;
  const PythonStack *stack = captureStack();
  ThreadContext &t = ThreadContext::current();
  {
    std::lock_guard guard(t.lock);
    t.resetIfStale(generation());
    stack = withBorrowedStack(t, stack);  // a backward asked for from a worker (reentrant)
  }
  return proton::enterBackward(t.capture(), stack);
}

void SessionManager::exitBackward(BackwardToken token) {
  if (token != 0) proton::exitBackward(token);
}

void SessionManager::appendContextNames(const ThreadContext &t, const PythonStack *stack,
                                        std::vector<StringId> &out) const {
  bool framework = frameworkLive();
  thread_local std::vector<ScopeFrame> kept;  // the frames this context shows
  kept.clear();
  for (const ScopeFrame &f : t.frames)
    if (f.framework == 0 || framework) kept.push_back(f);
  splicePath(stack, kept.data(), kept.size(), [&](StringId name) { out.push_back(name); });
  kept.clear();
}

}  // namespace proton
