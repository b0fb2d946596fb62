// SessionManager: the process-wide registry of sessions and the entry point for scopes,
// states, phases and output.
//
//   auto &m = SessionManager::global();
//   Result<StartResult> s = m.start(options);
//   PROTON_RETURN_IF_ERROR(m.enterScope(strings.intern("step"), false, nullptr));
//   PROTON_RETURN_IF_ERROR(m.exitScope(std::nullopt, {}));
//   PROTON_RETURN_IF_ERROR(m.finalize(std::nullopt, "", &written));
//
// Thread-safe. Scope and state calls take no shared lock: they read the live-session slots
// (atomic pointers; a Session object is never freed, only emptied at finalize), touch the
// calling thread's context, and lock only the session they record into.
// Start/activate/deactivate/finalize take the manager's mutex. "Profiling on" (any live session) is
// one relaxed atomic load.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/launch_table.h"
#include "context/backward_borrow.h"
#include "context/native_stack.h"
#include "context/python_context.h"
#include "core/capture_context.h"
#include "core/profile_metadata.h"
#include "core/session.h"
#include "core/tensor_metric.h"

namespace proton {

class GpuBackend;
class ThreadContext;
struct SessionMirror;

// The state tag and the frame below it (detail; 0 = none), as exchangeState swaps them.
struct StateTag {
  StringId name;
  StringId detail;
};

struct StartResult {
  SessionId id;
  bool created = true;  // false: an existing session with the same path
  std::string warning;  // non-empty: say it once to the user (e.g. no GPU runtime)
};

class SessionManager {
 public:
  static SessionManager &global();
  // fork() child handler (runtime/fork_safety.h): replaces the manager with an empty one.
  static void afterForkInChild();

  bool profilingOn() const { return liveCount_.load(std::memory_order_relaxed) > 0; }
  // Grows each time profiling turns on after being off; thread stacks from an earlier
  // period are dropped when their thread next records.
  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }

  Result<StartResult> start(const SessionOptions &options);
  // True while the calling thread is inside start(): its GPU runtime probe initialises CUDA,
  // and CUDA's injection entry point (api/injection.cc) must then defer its own start
  // instead of waiting for the manager's lock this thread holds.
  static bool startingOnThisThread();
  Status activate(std::optional<SessionId> id);
  Status deactivate(std::optional<SessionId> id, bool flushing);
  // Writes every phase of the session(s) and drops them. Paths written are appended.
  Status finalize(std::optional<SessionId> id, std::string_view format,
                  std::vector<std::string> *written);

  // Scopes on the calling thread. Metrics given at entry are added at entry.
  // scopeId (optional) receives an id unique in the process, also given back by exitScope.
  // tensors (optional): metrics whose values are device tensors (core/tensor_metric.h),
  // copied now on their stream and filed at the next flush.
  Status enterScope(StringId name, bool timed, std::shared_ptr<const MetricList> metrics,
                    uint64_t *scopeId = nullptr,
                    const std::vector<TensorMetric> *tensors = nullptr);
  // name: when given, must match the innermost open scope.
  Status exitScope(std::optional<StringId> name, const MetricList &metrics,
                   uint64_t *scopeId = nullptr, const std::vector<TensorMetric> *tensors = nullptr);
  void enterState(StringId name);
  void exitState();
  // Sets the state tag (StringId{} clears it) and returns the previous one, so that a caller
  // can restore it: how launch metadata functions run under
  // __proton_launch_metadata/<kernel being launched> (name/detail).
  StateTag exchangeState(StateTag tag);

  Result<size_t> depth(SessionId id);
  // With mode="periodic_flushing", also writes every phase already complete (a CPU-only
  // phase is complete at once); phases still waiting for device records are written by a
  // background thread as soon as their last record is filed.
  Result<PhaseId> advancePhase(SessionId id);
  // Writes and frees every complete phase of every periodic_flushing session (what the
  // background thread does every kFlushPollMs).
  Status writeCompletedPhases();
  Result<bool> isPhaseComplete(SessionId id, PhaseId phase);
  Status clear(SessionId id, PhaseId phase, bool upTo);
  Result<std::string> serialize(SessionId id, PhaseId phase, std::string_view format);

  void setCommandLine(std::string commandLine);
  // The program's working directory and main script, written into every profile's metadata
  // (viewers show paths relative to them); without a call, the working directory at write.
  void setProgram(std::string workingDirectory, std::string script);
  void setToolVersion(std::string version);
  std::vector<SessionId> liveSessions() const;

  // The node the calling thread's context resolves to in session s right now (current phase),
  // including the state tag: where a kernel launched now is filed. For backends.
  NodeId currentNode(Session &s, PhaseId &phase);
  // Launch path (vendor callbacks): where a launch by the calling thread belongs in every
  // active session, at most max entries; threadId receives the OS thread id. No shared lock.
  // launchName (optional) receives the name given by pending launch metadata (0: none); the
  // entries are then marked `named` and the kernel belongs at <node>/<launchName>. The
  // metadata is held until endLaunch().
  size_t launchContext(LaunchEntry *out, size_t max, uint64_t *threadId,
                       StringId *launchName = nullptr);
  // The launch that launchContext() attributed returned: ran = it was enqueued to run (not
  // failed, not captured into a graph). A launch that ran gets its launch metadata's metrics
  // (tree data) at <entry node>/<launchName>; the metadata is released either way.
  void endLaunch(const LaunchEntry *entries, size_t n, bool ran);
  // The calling thread's context as names, outermost first: its call stack while a call-stack
  // session is live (a backward worker's under its caller's), with its scopes and, while a
  // framework session is live, its framework frames spliced in; then the state tag (and its
  // detail).
  void contextNames(std::vector<StringId> &out);
  // The caller's side of backward attribution (context/backward_borrow.h): publishes the
  // calling thread's context for the framework's backward workers.
  BackwardToken enterBackward();
  void exitBackward(BackwardToken token);
  // For a graph node created now on this thread: contextNames, the sessions that do not record
  // now, and (inLaunch: created by the launch in progress) that launch's metadata.
  void captureContext(CaptureContext &out, bool inLaunch);

  // The frame launch metadata is evaluated under (the state hooks.launch enters, with the
  // kernel's name below it), and the name of Proton's kernel that copies tensor metric values.
  static constexpr const char *kMetadataScopeName = "__proton_launch_metadata";
  static constexpr const char *kMetricCopyKernelName = "<metric>";
  // While it lives, a kernel the calling thread launches is Proton's copy of tensor metric
  // values (DeviceMetricSink::copy and recordCaptured), and is filed as
  // <context>[/scope]/__proton_launch_metadata[/kernel]/<metric>, as triton.profiler files
  // its copy kernel: `scope` is a scope being entered whose values are copied before it
  // opens (0: none), `kernel` the kernel whose launch metadata gave them (0: a scope's).
  // The thread's own state tag is left out. Takes the thread's lock briefly; the caller
  // holds none.
  class MetricCopyPlacement {
   public:
    MetricCopyPlacement(StringId scope, StringId kernel);
    ~MetricCopyPlacement();
    MetricCopyPlacement(const MetricCopyPlacement &) = delete;
    MetricCopyPlacement &operator=(const MetricCopyPlacement &) = delete;
  };
  bool traceLive() const { return traceLive_.load(std::memory_order_relaxed) > 0; }
  bool pythonLive() const { return pythonLive_.load(std::memory_order_relaxed) > 0; }
  bool nativeLive() const { return nativeLive_.load(std::memory_order_relaxed) > 0; }
  // Sessions whose stacks join two sources: "python,native", and a framework's frames with
  // the native ones ("torch,native": the C/C++ frames below the interpreter).
  bool pythonNativeLive() const { return pythonNativeLive_.load(std::memory_order_relaxed) > 0; }
  bool nativeBelowLive() const { return nativeBelowLive_.load(std::memory_order_relaxed) > 0; }
  bool stackLive() const {
    return pythonLive() || nativeLive() || pythonNativeLive() || nativeBelowLive();
  }
  // The calling thread's stack for call-stack sessions: Python frames, unwound native frames,
  // or the two joined (one kind at a time: start() refuses a second), or nullptr when none runs.
  const PythonStack *captureStack() const noexcept {
    if (pythonLive()) return capturePythonStack();
    if (nativeLive()) return captureNativeStack();
    if (pythonNativeLive() || nativeBelowLive()) return captureJoinedStack();
    return nullptr;
  }
  // Python frames open now, when a session splices frames between them (0: none).
  bool pythonFramesLive() const { return pythonLive() || pythonNativeLive(); }

  // Framework frames (runtime/framework_frames.h): modules, operators and backward nodes an
  // adapter pushes on the calling thread, seen by sessions whose context lists the framework.
  bool frameworkLive() const { return frameworkLive_.load(std::memory_order_relaxed) > 0; }
  // kind: FrameworkFrame. withDepth: the frame was entered from Python (a module's hook), so
  // it splices between the Python frames open now.
  // False when no session records framework frames (nothing pushed).
  // `t` is the calling thread's ThreadContext::current(), looked up once by the caller.
  bool enterFramework(ThreadContext &t, StringId name, uint8_t kind, bool withDepth);
  // Pops the innermost framework frame (and any scope the user left open above it).
  void exitFramework(ThreadContext &t);
  // The calling thread's open module frames, as one interned list (nullptr: none).
  const PythonStack *currentModulePath();

  // Launch metadata (hook="triton"): the next kernel this thread launches is filed as
  // <context>/<name> instead of <context>/<kernel name>, and metrics are added to that node
  // (tree data) once, at launch. pop cancels it if no launch consumed it.
  // Tensor metrics (optional) are copied now, before the kernel runs.
  // metadataKernel: the kernel's own name, under which its metadata was evaluated (the
  // frame below __proton_launch_metadata where the tensors' copy is filed; 0: none).
  void pushLaunchMetadata(StringId name, const MetricList &metrics,
                          const std::vector<TensorMetric> *tensors = nullptr,
                          StringId metadataKernel = StringId{});
  void popLaunchMetadata();
  // The calling thread's metadata for its next launch, when there is one (pushed, not yet
  // consumed or popped): what the next kernel would get. For tests and diagnostics.
  bool pendingLaunchMetadata(StringId &name, MetricList &metrics);

  // Tensor metrics given now on this thread, each copied once for tree sessions (`tree`) and
  // once for trace sessions' slices (`trace`), as far as such sessions are active; those on a
  // stream being captured are left for DeviceMetricSink::recordCaptured. No lock held.
  struct TensorCopies {
    std::vector<PendingTensor> tree, trace;
    std::vector<const TensorMetric *> captured;
  };

 private:
  static constexpr size_t kMaxLiveSessions = 32;
  static constexpr int kFlushPollMs = 100;

  Result<Session *> find(SessionId id) const;  // mu_ held
  Status selectBackend(Session &session, std::string &warning, GpuBackend **out);
  Status writeSession(Session &s, OutputFormat format, std::vector<std::string> *written);
  void startFlusherLocked();  // mu_ held
  void flusherLoop();
  ProfileMetadata metadataFor(const Session &s, PhaseId phase) const;
  NodeId refreshMirror(Session &s, ThreadContext &t);
  // s.child(m.phase, parent, name) through the thread's cache (m refreshed for s).
  static NodeId mirroredChild(Session &s, SessionMirror &m, NodeId parent, StringId name);
  // Where work of the calling thread belongs in s now, with its state tag (mirror refreshed).
  NodeId contextNode(Session &s, ThreadContext &t, const PythonStack *stack);
  NodeId pythonContextNode(Session &s, ThreadContext &t, const PythonStack *stack);
  // launchContext for Proton's copy of tensor metric values (t.metricCopy): n entries so far.
  void metricCopyContext(ThreadContext &t, const PythonStack *stack, LaunchEntry *out, size_t max,
                         size_t &n);
  // `entering`: the scope the tensors are given to, not open yet (0: an open one's).
  void copyTensors(const std::vector<TensorMetric> *tensors, TensorCopies &out,
                   StringId entering = StringId{});
  Status enterScopeLocked(ThreadContext &t, const PythonStack *stack, StringId name, bool timed,
                          const std::shared_ptr<const MetricList> &metrics, uint64_t *scopeId,
                          const std::vector<TensorMetric> *tensors, MetricTarget *treeTargets,
                          size_t &numTree, TensorCopies &copies);
  // Fails if any active session would refuse a metric's type (nothing is recorded then).
  Status checkLiveMetricTypes(const MetricList &metrics);
  Status checkScopeExit(ThreadContext &t, std::optional<StringId> name, const MetricList &metrics,
                        const std::vector<TensorMetric> *tensors);
  // The innermost scope of t at `depth` was recorded in s.
  static bool recordedAt(const ThreadContext &t, Session *s, uint32_t depth);
  void exitScopeLocked(ThreadContext &t, const MetricList &metrics,
                       const std::vector<TensorMetric> *tensors, uint64_t *scopeId,
                       MetricTarget *treeTargets, size_t &numTree, MetricTarget *traceTargets,
                       size_t &numTrace);
  // The capture context of the calling thread now (t.lock held): names, sessions not recording.
  void captureContextLocked(const ThreadContext &t, const PythonStack *stack, CaptureContext &out);
  // node/<state>/<state detail>, for whichever of the two is set.
  static NodeId underState(Session &s, PhaseId phase, NodeId node, const ThreadContext &t);
  const PythonStack *captureJoinedStack() const noexcept;
  Status checkStackKind(const SessionOptions &options) const;   // mu_ held
  void countContext(const SessionOptions &options, int delta);  // mu_ held
  void pushFrameworkLocked(ThreadContext &t, StringId name, uint8_t kind, const PythonStack *stack);
  // Names of t's frames after its stack, the framework frames spliced in (t.lock held).
  void appendContextNames(const ThreadContext &t, const PythonStack *stack,
                          std::vector<StringId> &out) const;

  // Lock order: writeMu_, then mu_, then a session's own lock.
  std::mutex writeMu_;  // serialises writing part files (flusher, advancePhase) with finalize
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Session>> sessions_;      // index = id; never shrinks
  std::vector<std::vector<std::string>> partsWritten_;  // per session, by periodic flushing
  bool flusherStarted_ = false;                         // mu_ held
  bool gpuUsed_ = false;       // mu_ held: a GPU backend was acquired in this process
  bool gpuForbidden_ = false;  // set in a fork child of a process with gpuUsed_
  std::vector<bool> finalized_;
  std::vector<GpuBackend *> backends_;  // per session: the GPU backend it holds, or nullptr
  std::array<std::atomic<Session *>, kMaxLiveSessions> live_{};
  // Bit i set while live_[i] may hold a session (set after the store, cleared after the
  // reset): the per-operator and per-launch loops visit these slots only, not all 32.
  std::atomic<uint32_t> liveSlots_{0};
  static_assert(kMaxLiveSessions <= 32, "liveSlots_ is one bit per slot");
  // for (auto &slot : liveSlots()): the slots of live_ whose bit is set.
  class LiveSlots {
   public:
    class Iterator {
     public:
      Iterator(std::atomic<Session *> *slots, uint32_t mask) : slots_(slots), mask_(mask) {}
      std::atomic<Session *> &operator*() const { return slots_[__builtin_ctz(mask_)]; }
      Iterator &operator++() {
        mask_ &= mask_ - 1;
        return *this;
      }
      bool operator!=(const Iterator &other) const { return mask_ != other.mask_; }

     private:
      std::atomic<Session *> *slots_;
      uint32_t mask_;
    };
    LiveSlots(std::atomic<Session *> *slots, uint32_t mask) : slots_(slots), mask_(mask) {}
    Iterator begin() const { return {slots_, mask_}; }
    Iterator end() const { return {slots_, 0}; }

   private:
    std::atomic<Session *> *slots_;
    uint32_t mask_;
  };
  LiveSlots liveSlots() { return {live_.data(), liveSlots_.load(std::memory_order_acquire)}; }
  std::atomic<int> liveCount_{0};
  std::atomic<int> traceLive_{0};
  std::atomic<int> pythonLive_{0};        // live sessions with context="python"
  std::atomic<int> nativeLive_{0};        // live sessions with context="native"
  std::atomic<int> pythonNativeLive_{0};  // live sessions with context="python,native"
  std::atomic<int> nativeBelowLive_{0};   // live sessions with a framework and "native"
  std::atomic<int> frameworkLive_{0};     // live sessions whose context lists a framework
  std::atomic<uint64_t> generation_{1};   // live sessions with trace data: scopes need timestamps
  std::string commandLine_;
  std::string workingDirectory_;
  std::string script_;
  std::string toolVersion_ = "0.0.0";
};

}  // namespace proton
