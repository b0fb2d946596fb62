#include "runtime/session_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/gpu_backend.h"
#include "backends/runtime_probe.h"
#include "context/shadow_context.h"
#include "core/clock.h"
#include "core/rank.h"
#include "core/stats.h"
#include "core/string_table.h"
#include "runtime/fork_safety.h"
#include "runtime/profile_output.h"
#include "runtime/session_host.h"
#include "runtime/session_manager_internal.h"
#include "writers/writer.h"

namespace proton {
namespace {

Status sessionNotInitialized(SessionId id) {
  return notFound("Session has not been initialized: " + std::to_string(id.value));
}

// Launches whose kernel record never arrived, even after the final flush.
Counter &neverCompleted() {
  static Counter &counter = Stats::global().counter("kernels_never_completed");
  return counter;
}

}  // namespace

namespace detail {

// Chains scope names into MirrorEntry::pathHash (never 0 for a non-empty path).
uint64_t chainHash(uint64_t parent, StringId name) {
  uint64_t h = (parent ^ (uint64_t(name.value) + 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h | 1;
}

// ROOT/<frames of stack>/<names of entries[0..n)>/[extra]/[detail]: the node of a
// Python-context path.
NodeId resolvePythonPath(Session &s, PhaseId phase, const PythonStack *stack,
                         const MirrorEntry *entries, size_t n, StringId extra, StringId detail,
                         bool trailingFrames) {
  NodeId node = kRootNode;
  splicePath(
      stack, entries, n,
      [&](StringId name) {
        if (node != kNoNode) node = s.child(phase, node, name);
      },
      trailingFrames);
  if (extra != StringId{} && node != kNoNode) node = s.child(phase, node, extra);
  if (detail != StringId{} && node != kNoNode) node = s.child(phase, node, detail);
  return node;
}

}  // namespace detail

using namespace detail;

namespace {
// The process's manager; replaced (never freed) in a child made by fork().
std::atomic<SessionManager *> gManager{nullptr};
bool gWarnedCpuOnly = false;  // the "recording CPU scopes only" warning is given once
}  // namespace

SessionManager &SessionManager::global() {
  if (SessionManager *m = gManager.load(std::memory_order_acquire); PROTON_LIKELY(m)) return *m;
  static bool once = [] {
    // Register the core's loss counters up front, so every profile lists them, zeros included.
    typeConflictCounter();
    neverCompleted();
    Stats::global().counter("kernel_records_for_cleared_phase");
    gManager.store(new SessionManager(), std::memory_order_release);  // used by exit handlers
    installForkHandlers();
    BackendHost::install(&sessionHost());  // backends ask it where launches belong
    return true;
  }();
  (void)once;
  return *gManager.load(std::memory_order_acquire);
}

void SessionManager::afterForkInChild() {
  // Only the forking thread exists now; the parent's locks and sessions are not touched.
  SessionManager *old = gManager.load(std::memory_order_relaxed);
  if (!old) return;
  auto *fresh = new SessionManager();
  fresh->generation_.store(old->generation_.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  fresh->gpuForbidden_ = old->gpuUsed_ || old->gpuForbidden_;
  fresh->commandLine_ = old->commandLine_;
  fresh->workingDirectory_ = old->workingDirectory_;
  fresh->script_ = old->script_;
  fresh->toolVersion_ = old->toolVersion_;
  gWarnedCpuOnly = false;
  gManager.store(fresh, std::memory_order_release);
}

void SessionManager::setCommandLine(std::string commandLine) {
  std::lock_guard lock(mu_);
  commandLine_ = std::move(commandLine);
}

void SessionManager::setProgram(std::string workingDirectory, std::string script) {
  std::lock_guard lock(mu_);
  workingDirectory_ = std::move(workingDirectory);
  script_ = std::move(script);
}

void SessionManager::setToolVersion(std::string version) {
  std::lock_guard lock(mu_);
  toolVersion_ = std::move(version);
}

Result<Session *> SessionManager::find(SessionId id) const {
  if (id.value < 0 || static_cast<size_t>(id.value) >= sessions_.size() || finalized_[id.value])
    return sessionNotInitialized(id);
  return sessions_[id.value].get();
}

std::vector<SessionId> SessionManager::liveSessions() const {
  std::lock_guard lock(mu_);
  std::vector<SessionId> ids;
  for (size_t i = 0; i < sessions_.size(); ++i)
    if (!finalized_[i]) ids.push_back(SessionId{static_cast<int32_t>(i)});
  return ids;
}

namespace {

Status cpuOnly(const std::string &why, std::string &warning) {
  if (!gWarnedCpuOnly) warning = "[PROTON] " + why + "; recording CPU scopes and metrics only";
  gWarnedCpuOnly = true;
  return {};
}

bool isPeriodic(const SessionOptions &options) { return options.mode.name == "periodic_flushing"; }
bool isPeriodic(const Session &s) { return isPeriodic(s.options()); }

// periodic_flushing[:format=F]: the format of the part files (default: the data kind's).
Result<OutputFormat> periodicFormat(const SessionOptions &options) {
  for (const auto &[key, value] : options.mode.options)
    if (key != "format")
      return Status{StatusCode::kInvalidArgument, "[PROTON] Unknown option '" + key +
                                                      "' for mode 'periodic_flushing'. " +
                                                      "Allowed options: format"};
  auto it = options.mode.options.find("format");
  Result<OutputFormat> format =
      parseOutputFormat(it == options.mode.options.end() ? "" : it->second);
  if (!format.isOk()) return format.status();
  OutputFormat f =
      format.value() == OutputFormat::kDefault ? defaultFormat(options.data) : format.value();
  PROTON_RETURN_IF_ERROR(checkFormatSupported(options.data, f));
  return f;
}

// The trace layout a session's mode asks for (instrumentation's trace_layout option).
TraceLayout traceLayoutOf(const SessionOptions &options) {
  auto it = options.mode.options.find("trace_layout");
  return it != options.mode.options.end() && it->second == "triton" ? TraceLayout::kTriton
                                                                    : TraceLayout::kFull;
}

// Modes the core implements itself; "pcsampling" is the GPU backend's to accept or refuse.
Status checkMode(const SessionOptions &options) {
  const ModeSpec &mode = options.mode;
  if (mode.name.empty() || mode.name == "pcsampling") return {};
  // triton.profiler's "mma" runs the same compiler passes as its "default" (the mode object
  // feeds only the buffer, metric and sampling options): so does Proton's, for instrumentation.
  if (mode.name == "mma") {
    if (options.backend == BackendKind::kInstrumentation) return {};
    return invalidArgument(
        "[PROTON] mode='mma' is an intra-kernel instrumentation mode: use it with "
        "backend='instrumentation'.");
  }
  if (mode.name == "periodic_flushing") return periodicFormat(options).status();
  std::string backend = options.backend == BackendKind::kAuto
                            ? std::string(
                                  "the default backend (cupti on an NVIDIA GPU, CPU scopes "
                                  "only elsewhere)")
                            : std::string("backend '") + backendKindName(options.backend) + "'";
  return {StatusCode::kUnavailable, "[PROTON] mode='" + mode.toString() + "' is not supported by " +
                                        backend + " in this build of Proton."};
}

bool needsGpuBackend(const SessionOptions &options) {
  return options.backend == BackendKind::kCupti ||
         options.backend == BackendKind::kInstrumentation || options.mode.name == "pcsampling";
}

}  // namespace

Status SessionManager::selectBackend(Session &session, std::string &warning, GpuBackend **out) {
  *out = nullptr;
  const SessionOptions &options = session.options();
  // backend="instrumentation" is kernel tracing plus intra-kernel buffers: the CUPTI backend.
  if (options.backend != BackendKind::kAuto && options.backend != BackendKind::kCupti &&
      options.backend != BackendKind::kInstrumentation) {
    return {StatusCode::kUnavailable, std::string("[PROTON] backend='") +
                                          backendKindName(options.backend) +
                                          "' is not available in this build of Proton."};
  }
  bool explicitCupti = needsGpuBackend(options);
  if (gpuForbidden_) {
    std::string why =
        "this process was forked from one that was profiling its GPU, and CUDA and CUPTI "
        "cannot be used again in such a child";
    if (!explicitCupti) return cpuOnly(why, warning);
    return {StatusCode::kUnavailable, "[PROTON] GPU profiling is off: " + why};
  }
  // What asked for the GPU, as the user wrote it.
  const std::string what = options.backend != BackendKind::kAuto
                               ? std::string("backend='") + backendKindName(options.backend) + "'"
                               : "mode='" + options.mode.toString() + "'";
  const RuntimeProbe &probe = probeCudaRuntime();
  if (!probe.available) {
    if (!explicitCupti) return cpuOnly("no GPU runtime was found: " + probe.reason, warning);
    return {StatusCode::kUnavailable,
            "[PROTON] " + what + " needs an NVIDIA GPU, but " + probe.reason +
                ". Leave backend and mode unset to record CPU scopes and metrics only."};
  }
  GpuBackend *backend = cuptiBackend();
  if (!backend) {
    std::string why =
        "this build of Proton has no CUPTI backend (CUPTI headers were not found when it "
        "was built; reinstall with the CUDA toolkit present)";
    if (!explicitCupti) return cpuOnly("a GPU was found, but " + why, warning);
    return {StatusCode::kUnavailable, "[PROTON] " + what + ": " + why};
  }
  Status status = backend->acquire(session);
  if (status.isOk()) {
    gpuUsed_ = true;
    *out = backend;
    return {};
  }
  // Another profiler holding CUPTI is always an error: silently profiling only the CPU
  // would look like a profile with no kernels.
  if (explicitCupti || status.code() == StatusCode::kBusy) return status;
  return cpuOnly(status.message().substr(status.message().rfind("[PROTON] ") == 0 ? 9 : 0),
                 warning);
}

namespace {
thread_local bool tStarting = false;
}  // namespace

bool SessionManager::startingOnThisThread() { return tStarting; }

Result<StartResult> SessionManager::start(const SessionOptions &requested) {
  struct StartingMark {
    StartingMark() { tStarting = true; }
    ~StartingMark() { tStarting = false; }
  } mark;
  SessionOptions options = requested;
  options.rank = detectRank([](const char *name) -> const char * { return std::getenv(name); });
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (!finalized_[i] && sessions_[i]->options().path == options.path) {
      sessions_[i]->setActive(true);
      return StartResult{SessionId{static_cast<int32_t>(i)}, false, ""};
    }
  }
  StartResult result;
  PROTON_RETURN_IF_ERROR(checkMode(options));
  if ((options.context == ContextKind::kNative && pythonLive()) ||
      (options.context == ContextKind::kPython && nativeLive()))
    return invalidArgument(
        "[PROTON] context='native' and context='python' sessions cannot run at the same time; "
        "finalize the one that is running first.");
  PROTON_RETURN_IF_ERROR(checkStackKind(options));
  size_t slot = 0;
  while (slot < kMaxLiveSessions && live_[slot].load(std::memory_order_relaxed)) ++slot;
  if (slot == kMaxLiveSessions) {
    return Status{StatusCode::kUnavailable, "[PROTON] Too many sessions at once (the limit is " +
                                                std::to_string(kMaxLiveSessions) +
                                                "); finalize one before starting another."};
  }
  result.id = SessionId{static_cast<int32_t>(sessions_.size())};
  auto session = std::make_unique<Session>(result.id, options);
  GpuBackend *backend = nullptr;
  PROTON_RETURN_IF_ERROR(selectBackend(*session, result.warning, &backend));
  if (sessions_.empty()) ThreadContext::registerMainThread();
  sessions_.push_back(std::move(session));
  finalized_.push_back(false);
  partsWritten_.emplace_back();
  backends_.push_back(backend);
  if (isPeriodic(options)) startFlusherLocked();
  sessions_.back()->setActive(true);
  if (liveCount_.load(std::memory_order_relaxed) == 0)
    generation_.fetch_add(1, std::memory_order_relaxed);
  live_[slot].store(sessions_.back().get(), std::memory_order_release);
  liveSlots_.fetch_or(1u << slot, std::memory_order_release);
  if (options.data == DataKind::kTrace) traceLive_.fetch_add(1, std::memory_order_relaxed);
  countContext(options, 1);
  liveCount_.fetch_add(1, std::memory_order_relaxed);
  return result;
}

Status SessionManager::activate(std::optional<SessionId> id) {
  std::lock_guard lock(mu_);
  if (id) {
    Result<Session *> s = find(*id);
    if (!s.isOk()) return s.status();
    s.value()->setActive(true);
    return {};
  }
  for (size_t i = 0; i < sessions_.size(); ++i)
    if (!finalized_[i]) sessions_[i]->setActive(true);
  return {};
}

Status SessionManager::deactivate(std::optional<SessionId> id, bool flushing) {
  std::lock_guard lock(mu_);
  std::vector<GpuBackend *> toFlush;
  auto off = [&](size_t i) {
    sessions_[i]->setActive(false);
    if (flushing && backends_[i]) toFlush.push_back(backends_[i]);
  };
  if (id) {
    Result<Session *> s = find(*id);
    if (!s.isOk()) return s.status();
    off(id->value);
  } else {
    for (size_t i = 0; i < sessions_.size(); ++i)
      if (!finalized_[i]) off(i);
  }
  // With one backend today this flushes at most once; the loop stays correct with more.
  for (size_t i = 0; i < toFlush.size(); ++i)
    if (std::find(toFlush.begin(), toFlush.begin() + i, toFlush[i]) == toFlush.begin() + i)
      toFlush[i]->flush();
  return {};
}

ProfileMetadata SessionManager::metadataFor(const Session &s, PhaseId phase) const {
  ProfileMetadata m;
  m.toolVersion = toolVersion_;
  m.commandLine = commandLine_;
  m.workingDirectory = workingDirectory_;
  if (m.workingDirectory.empty()) {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) m.workingDirectory = cwd;
  }
  m.script = script_;
  m.startTimeUnixNs = s.startTimeUnixNs();
  m.monotonicToUnixNs = static_cast<int64_t>(wallClockNs()) - static_cast<int64_t>(monotonicNs());
  m.sessionName = s.options().path;
  m.context = s.options().sources.name();
  m.data = dataKindName(s.options().data);
  // The backend asked for, or for the default one, the backend it runs on ("cupti" on a GPU
  // machine, "none" where only CPU scopes are recorded).
  size_t index = s.id().value;
  const GpuBackend *gpu = index < backends_.size() ? backends_[index] : nullptr;
  m.backend = s.options().backend == BackendKind::kAuto && gpu
                  ? gpu->name()
                  : backendKindName(s.options().backend);
  m.mode = s.options().mode.toString();
  m.phase = phase.value;
  m.rank = s.options().rank.rank;
  m.worldSize = s.options().rank.worldSize;
  if (m.rank >= 0) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) m.host = host;
  }
  m.stats = Stats::global().since(s.statsAtStart());
  s.metricAggregations(m.exclusiveMetrics, m.propertyMetrics);
  return m;
}

Status SessionManager::writeSession(Session &s, OutputFormat format,
                                    std::vector<std::string> *written) {
  bool parts = isPeriodic(s) || s.currentPhase().value > 0;
  for (PhaseId phase : s.phaseIds()) {
    ProfileMetadata metadata = metadataFor(s, phase);
    std::string path =
        profilePath(s.options(), parts ? std::optional<PhaseId>(phase) : std::nullopt, format);
    Status status;
    s.readPhase(phase, [&](const PhaseData &data) {
      status = writeProfileFile(path,
                                ProfileView{data, metadata, DeviceTable::global(),
                                            StringTable::global(), traceLayoutOf(s.options())},
                                format);
    });
    PROTON_RETURN_IF_ERROR(status);
    if (written) written->push_back(path);
  }
  return {};
}

Status SessionManager::finalize(std::optional<SessionId> id, std::string_view formatName,
                                std::vector<std::string> *written) {
  Result<OutputFormat> format = parseOutputFormat(formatName);
  if (!format.isOk()) return format.status();
  std::lock_guard writing(writeMu_);  // no part file is being written meanwhile
  std::lock_guard lock(mu_);
  std::vector<Session *> targets;
  if (id) {
    if (id->value < 0 || static_cast<size_t>(id->value) >= sessions_.size())
      return sessionNotInitialized(*id);
    if (finalized_[id->value]) return {};  // finalizing twice is harmless
    targets.push_back(sessions_[id->value].get());
  } else {
    for (size_t i = 0; i < sessions_.size(); ++i)
      if (!finalized_[i]) targets.push_back(sessions_[i].get());
  }
  for (Session *s : targets)
    PROTON_RETURN_IF_ERROR(checkFormatSupported(s->options().data, format.value()));
  // Stop recording first, then wait for the device records of everything launched so far.
  std::vector<bool> wasActive;
  std::vector<GpuBackend *> flushed;
  for (Session *s : targets) {
    wasActive.push_back(s->active());
    s->setActive(false);
  }
  for (Session *s : targets) {
    GpuBackend *b = backends_[s->id().value];
    if (b && std::find(flushed.begin(), flushed.end(), b) == flushed.end()) {
      b->flush();
      flushed.push_back(b);
    }
  }
  Status firstError;
  for (size_t t = 0; t < targets.size(); ++t) {
    Session *s = targets[t];
    if (int64_t lost = s->abandonPending(); lost > 0) neverCompleted().add(lost);
    // Part files keep one format: the mode's.
    OutputFormat f = isPeriodic(*s) ? periodicFormat(s->options()).value()
                     : format.value() == OutputFormat::kDefault ? defaultFormat(s->options().data)
                                                                : format.value();
    if (written) {
      const std::vector<std::string> &earlier = partsWritten_[s->id().value];
      written->insert(written->end(), earlier.begin(), earlier.end());
    }
    Status status = writeSession(*s, f, written);
    if (!status.isOk()) {
      // Keep the session and its data, so the user can fix the problem and finalize again.
      s->setActive(wasActive[t]);
      if (firstError.isOk()) firstError = status;
      continue;
    }
    finalized_[s->id().value] = true;
    for (size_t i = 0; i < kMaxLiveSessions; ++i) {
      if (live_[i].load(std::memory_order_relaxed) != s) continue;
      live_[i].store(nullptr, std::memory_order_release);
      liveSlots_.fetch_and(~(1u << i), std::memory_order_release);
    }
    liveCount_.fetch_sub(1, std::memory_order_relaxed);
    if (s->options().data == DataKind::kTrace) traceLive_.fetch_sub(1, std::memory_order_relaxed);
    countContext(s->options(), -1);
    s->releaseData();
    if (GpuBackend *b = backends_[s->id().value]) {
      backends_[s->id().value] = nullptr;
      b->release(*s);
    }
  }
  return firstError;
}

NodeId SessionManager::refreshMirror(Session &s, ThreadContext &t) {
  SessionMirror &m = t.mirror(s.id());
  uint64_t epoch = s.epoch();
  if (PROTON_UNLIKELY(m.epoch != epoch)) {
    PhaseId phase = s.currentPhase();
    NodeId parent = kRootNode;
    for (size_t i = 0; i < m.entries.size(); ++i) {
      MirrorEntry &e = m.entries[i];
      e.node = usesCallStack(s) ? resolvePythonPath(s, phase, e.stack, m.entries.data(), i + 1, {},
                                                    {}, e.spliceDepth < 0)
                                : s.child(phase, parent, e.name);
      if (e.node == kNoNode) e.node = kRootNode;  // phase vanished under us; next call fixes
      parent = e.node;
    }
    m.phase = phase;
    m.epoch = epoch;
  }
  return m.entries.empty() ? kRootNode : m.entries.back().node;
}

NodeId SessionManager::mirroredChild(Session &s, SessionMirror &m, NodeId parent, StringId name) {
  ChildNodeEntry *e = m.children.slot((uint64_t(parent.value) << 32) | name.value);
  if (PROTON_LIKELY(e && e->parent == parent.value && e->name == name.value && e->epoch == m.epoch))
    return NodeId{e->node};
  NodeId node = s.child(m.phase, parent, name);
  if (e && node != kNoNode) *e = ChildNodeEntry{parent.value, name.value, node.value, m.epoch};
  return node;
}

NodeId SessionManager::pythonContextNode(Session &s, ThreadContext &t, const PythonStack *stack) {
  SessionMirror &m = t.mirror(s.id());
  if (!stack) stack = emptyPythonStack();
  uint64_t scopes = m.entries.empty() ? 0 : m.entries.back().pathHash;
  uint64_t key =
      reinterpret_cast<uintptr_t>(stack) ^ (scopes * 31) ^ (uint64_t(t.state.value) << 7);
  // Launches inside a launch metadata function (state detail set) are rare: not cached.
  PythonNodeEntry *c = t.stateDetail == StringId{} ? m.launches.slot(key) : nullptr;
  if (PROTON_LIKELY(c && c->stack == stack && c->scopes == scopes && c->state == t.state &&
                    c->epoch == m.epoch))
    return c->node;
  NodeId node = resolvePythonPath(s, m.phase, stack, m.entries.data(), m.entries.size(), t.state,
                                  t.stateDetail);
  if (node != kNoNode && c) *c = PythonNodeEntry{stack, scopes, t.state, m.epoch, node};
  return node;
}

NodeId SessionManager::underState(Session &s, PhaseId phase, NodeId node, const ThreadContext &t) {
  if (t.state != StringId{} && node != kNoNode) node = s.child(phase, node, t.state);
  if (t.stateDetail != StringId{} && node != kNoNode) node = s.child(phase, node, t.stateDetail);
  return node;
}

NodeId SessionManager::contextNode(Session &s, ThreadContext &t, const PythonStack *stack) {
  NodeId node = refreshMirror(s, t);
  if (usesCallStack(s)) return pythonContextNode(s, t, stack);
  return underState(s, t.mirror(s.id()).phase, node, t);
}

NodeId SessionManager::currentNode(Session &s, PhaseId &phase) {
  // Captured before taking the thread's lock: the capture may wait for the GIL.
  const PythonStack *stack = usesCallStack(s) ? captureStack() : nullptr;
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  if (stack) stack = withBorrowedStack(t, stack);
  NodeId node = contextNode(s, t, stack);
  phase = t.mirror(s.id()).phase;
  return node;
}

Result<size_t> SessionManager::depth(SessionId id) {
  Session *s;
  {
    std::lock_guard lock(mu_);
    Result<Session *> found = find(id);
    if (!found.isOk()) return found.status();
    s = found.value();
  }
  ThreadContext &t = ThreadContext::current();
  std::lock_guard guard(t.lock);
  t.resetIfStale(generation());
  refreshMirror(*s, t);
  return t.mirror(id).entries.size();
}

Result<PhaseId> SessionManager::advancePhase(SessionId id) {
  PhaseId next;
  bool periodic;
  GpuBackend *backend = nullptr;
  {
    std::lock_guard lock(mu_);
    Result<Session *> s = find(id);
    if (!s.isOk()) return s.status();
    next = s.value()->advancePhase();
    periodic = isPeriodic(*s.value());
    backend = backends_[id.value];
  }
  // Tensor metrics are read back at a flush: one now lets the phase just ended complete.
  DeviceMetricSink *sink = deviceMetricSink();
  if (periodic && backend && sink && sink->pending() > 0) backend->flush();
  if (periodic) PROTON_RETURN_IF_ERROR(writeCompletedPhases());
  return next;
}

Status SessionManager::writeCompletedPhases() {
  struct Pending {
    SessionId session;
    std::unique_ptr<PhaseData> phase;
    ProfileMetadata metadata;
    std::string path;
    OutputFormat format;
    TraceLayout layout;
  };
  std::lock_guard writing(writeMu_);
  std::vector<Pending> work;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < sessions_.size(); ++i) {
      Session &s = *sessions_[i];
      if (finalized_[i] || !isPeriodic(s)) continue;
      OutputFormat format = periodicFormat(s.options()).value();
      for (auto &phase : s.takeCompletePhases()) {
        PhaseId id = phase->id();
        work.push_back({s.id(), std::move(phase), metadataFor(s, id),
                        profilePath(s.options(), id, format), format, traceLayoutOf(s.options())});
      }
    }
  }
  // Written outside mu_: scopes, launches and other sessions go on meanwhile.
  Status firstError;
  for (Pending &p : work) {
    Status status = writeProfileFile(
        p.path,
        ProfileView{*p.phase, p.metadata, DeviceTable::global(), StringTable::global(), p.layout},
        p.format);
    std::lock_guard lock(mu_);
    if (status.isOk()) {
      partsWritten_[p.session.value].push_back(p.path);
    } else {
      // Keep the data: finalize tries again and reports the error if it persists.
      sessions_[p.session.value]->restorePhase(std::move(p.phase));
      if (firstError.isOk()) firstError = status;
    }
  }
  return firstError;
}

void SessionManager::startFlusherLocked() {
  if (flusherStarted_) return;
  flusherStarted_ = true;
  // Detached and never stopped: the manager is never destroyed, and the thread sleeps
  // between polls.
  std::thread([this] { flusherLoop(); }).detach();
}

void SessionManager::flusherLoop() {
  bool warned = false;  // one line, not one per poll; finalize reports the error again
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kFlushPollMs));
    Status status = writeCompletedPhases();
    if (!status.isOk() && !warned) {
      warned = true;
      std::fprintf(stderr, "%s (periodic flushing keeps the phase in memory)\n",
                   status.message().c_str());
    }
  }
}

Result<bool> SessionManager::isPhaseComplete(SessionId id, PhaseId phase) {
  std::lock_guard lock(mu_);
  Result<Session *> s = find(id);
  if (!s.isOk()) return s.status();
  return s.value()->isPhaseComplete(phase);
}

Status SessionManager::clear(SessionId id, PhaseId phase, bool upTo) {
  std::lock_guard lock(mu_);
  Result<Session *> s = find(id);
  if (!s.isOk()) return s.status();
  s.value()->clear(phase, upTo);
  return {};
}

Result<std::string> SessionManager::serialize(SessionId id, PhaseId phase,
                                              std::string_view formatName) {
  Result<OutputFormat> format = parseOutputFormat(formatName);
  if (!format.isOk()) return format.status();
  std::lock_guard lock(mu_);
  Result<Session *> found = find(id);
  if (!found.isOk()) return found.status();
  Session &s = *found.value();
  PROTON_RETURN_IF_ERROR(checkFormatSupported(s.options().data, format.value()));
  OutputFormat f =
      format.value() == OutputFormat::kDefault ? defaultFormat(s.options().data) : format.value();
  ProfileMetadata metadata = metadataFor(s, phase);
  StringSink sink;
  Status status;
  bool exists = s.readPhase(phase, [&](const PhaseData &data) {
    ProfileView view{data, metadata, DeviceTable::global(), StringTable::global(),
                     traceLayoutOf(s.options())};
    status = writeProfile(f, view, sink);
  });
  if (!exists) {
    return notFound("[PROTON] Session " + std::to_string(id.value) + " has no data for phase " +
                    std::to_string(phase.value));
  }
  PROTON_RETURN_IF_ERROR(status);
  return std::move(sink.out);
}

}  // namespace proton
