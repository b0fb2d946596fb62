#include "api/injection.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/runtime_probe.h"
#include "proton/proton.h"
#include "runtime/session_manager.h"

namespace proton::api {
namespace {

std::mutex gStartMu;
std::atomic<int> gSession{-1};
std::atomic<bool> gDeferred{false};
std::atomic<bool> gHandlersInstalled{false};
int gSignalPipe[2] = {-1, -1};
pid_t gWatcherPid = 0;
struct sigaction gPrevious[NSIG];

const char *envOr(const EnvLookup &env, const char *name, const char *fallback) {
  const char *v = env(name);
  return v && v[0] ? v : fallback;
}

const char *processEnv(const char *name) { return std::getenv(name); }

// One line appended to the launcher's report file (O_APPEND: ranks may share it).
void report(const std::string &line) {
  const char *path = std::getenv("PROTON_INJECT_REPORT");
  if (!path || !path[0]) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  close(fd);
}

// Async-signal-safe: hands the signal to the watcher thread, which writes the profile
// outside the handler (finalize takes locks and allocates), then lets the signal kill us.
void onSignal(int signum) {
  int saved = errno;
  if (getpid() != gWatcherPid) {  // a fork child: no watcher there; die as if we were absent
    signal(signum, SIG_DFL);
    kill(getpid(), signum);
  } else {
    unsigned char byte = static_cast<unsigned char>(signum);
    ssize_t ignored = write(gSignalPipe[1], &byte, 1);
    (void)ignored;
  }
  errno = saved;
}

void watchSignals() {
  unsigned char byte;
  while (read(gSignalPipe[0], &byte, 1) != 1) {
    if (errno != EINTR) return;
  }
  int signum = byte;
  writeInjectedSession(signum == SIGTERM ? "on SIGTERM" : "on SIGINT");
  sigaction(signum, &gPrevious[signum], nullptr);  // SIG_DFL: ours replaced only that
  kill(getpid(), signum);
}

void onExit() { writeInjectedSession("at exit"); }

// SIGTERM and SIGINT get ours only where the program left the default action (a handler of
// its own is never replaced; a program that exits from it gets its profile written at exit).
void installExitHandlers() {
  if (gHandlersInstalled.exchange(true)) return;
  std::atexit(onExit);
  if (pipe2(gSignalPipe, O_CLOEXEC) != 0) return;
  gWatcherPid = getpid();
  try {
    std::thread(watchSignals).detach();
  } catch (...) {
    return;  // no thread: the profile is still written at exit, not on signals
  }
  for (int signum : {SIGTERM, SIGINT}) {
    struct sigaction current {};
    if (sigaction(signum, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO))
      continue;
    struct sigaction ours {};
    ours.sa_handler = onSignal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    gPrevious[signum] = current;
    sigaction(signum, &ours, nullptr);
  }
}

}  // namespace

bool launchedByProton(const EnvLookup &env) { return env("PROTON_INJECT_NAME") != nullptr; }

Result<SessionOptions> injectedOptions(const EnvLookup &env) {
  return parseSessionOptions(
      envOr(env, "PROTON_INJECT_NAME", "proton"), envOr(env, "PROTON_INJECT_CONTEXT", "shadow"),
      envOr(env, "PROTON_INJECT_DATA", "tree"), envOr(env, "PROTON_INJECT_BACKEND", ""),
      envOr(env, "PROTON_INJECT_MODE", ""));
}

int commandLineSession() { return gSession.load(); }

void setCommandLineSession(int id) { gSession.store(id); }

int startInjectedSession(bool fromCuda) {
  if (fromCuda) {
    noteCudaInitialising();
    report("cuda " + std::to_string(getpid()));
  }
  int id = gSession.load();
  if (id >= 0) {
    // Started earlier by the program's first proton.h call: its atexit handler was registered
    // before the CUDA runtime's, so it would run after CUDA's teardown. One registered now
    // runs first (writing twice is harmless: the second finalize finds nothing).
    static std::atomic<bool> again{false};
    if (fromCuda && !again.exchange(true)) std::atexit(onExit);
    return id;
  }
  if (SessionManager::startingOnThisThread()) {
    gDeferred.store(true);  // CUDA initialises inside another start(): we hold its lock
    return -1;
  }
  std::lock_guard lock(gStartMu);
  if ((id = gSession.load()) >= 0) return id;
  Result<SessionOptions> options = injectedOptions(processEnv);
  if (!options.isOk()) {
    std::fprintf(stderr, "[PROTON] not profiling: %s\n", options.status().message().c_str());
    return -1;
  }
  SessionManager &manager = SessionManager::global();
  manager.setToolVersion(PROTON_VERSION);
  if (const char *command = std::getenv("PROTON_INJECT_COMMAND")) manager.setCommandLine(command);
  Result<StartResult> started = manager.start(options.value());
  if (!started.isOk()) {
    std::fprintf(stderr, "[PROTON] not profiling: %s\n", started.status().message().c_str());
    return -1;
  }
  if (!started.value().warning.empty())
    std::fprintf(stderr, "%s\n", started.value().warning.c_str());
  id = started.value().id.value;
  gSession.store(id);
  report("started " + std::to_string(getpid()));
  installExitHandlers();
  return id;
}

void startDeferredInjection() {
  if (gDeferred.exchange(false) && gSession.load() < 0) startInjectedSession(false);
}

void writeInjectedSession(const char *when) {
  std::vector<std::string> written;
  Status status = SessionManager::global().finalize(std::nullopt, "", &written);
  if (!status.isOk()) {
    std::fprintf(stderr, "[PROTON] could not write the profile %s: %s\n", when,
                 status.message().c_str());
    return;
  }
  for (const std::string &path : written) {
    if (path == "-") continue;
    std::fprintf(stderr, "[PROTON] profile written to %s (%s)\n", path.c_str(), when);
    report("wrote " + path);
  }
}

}  // namespace proton::api

// CUDA's injection entry point: the driver calls it from cuInit when CUDA_INJECTION64_PATH
// names this library. Returns 1 (success) whatever happens: profiling failing must never make
// CUDA fail to initialise.
extern "C" PROTON_API int InitializeInjection(void) {
  try {
    proton::api::startInjectedSession(true);
  } catch (...) {
    std::fprintf(stderr, "[PROTON] not profiling: the session could not start\n");
  }
  return 1;
}
