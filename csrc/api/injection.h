// The command line's session in a program run as `proton ./app` (CUDA injection), and the
// session options the launcher hands to it.
//
//   CUDA_INJECTION64_PATH=<package>/lib/libprotonprof.so PROTON_INJECT_NAME=run ./app
//   -> cuInit calls InitializeInjection -> startInjectedSession() -> session "run" recording
//   -> exit(), return from main, SIGTERM or SIGINT -> writeInjectedSession() -> run.hatchet
//
// The launcher (python/proton/cli.py) passes its options in the environment, so that every
// process of the program (children, MPI ranks) sees them: PROTON_INJECT_NAME, _CONTEXT,
// _DATA, _BACKEND, _MODE (as proton.start's arguments), _COMMAND (the command line, for the
// profile's metadata) and _REPORT (a file the process appends "cuda <pid>" to when CUDA
// initialises, "started <pid>" when the session starts and "wrote <path>" per file written,
// so that the launcher can say what happened, including "the program never initialised
// CUDA").
//
// The session starts at cuInit, or earlier at the program's first proton/proton.h call
// (start, a scope, a state): scopes opened before the first CUDA call are then recorded.
//
// Thread-safe. Nothing here throws: the user's program must not break because of us.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

#include "core/options.h"
#include "core/status.h"

namespace proton::api {

using EnvLookup = std::function<const char *(const char *)>;

// Whether the launcher asked for injection (PROTON_INJECT_NAME is set).
bool launchedByProton(const EnvLookup &env);
// The session options the launcher asked for (defaults where a variable is unset).
Result<SessionOptions> injectedOptions(const EnvLookup &env);

// Starts the command line's session once (later calls return it); -1 and a message on stderr
// if it cannot start. Safe to call from inside cuInit (fromCuda) and from the API.
int startInjectedSession(bool fromCuda);
// The command line's session, or -1 when there is none in this process.
int commandLineSession();
// Marks a session as the command line's (the Python launcher's session 0).
void setCommandLineSession(int id);
// Finalizes every session and reports the files (at exit and on SIGTERM/SIGINT).
void writeInjectedSession(const char *when);
// Starts a session whose start was deferred because CUDA initialised inside another
// session's start (a Python or C++ start() before the program's first CUDA call). Called
// after every start().
void startDeferredInjection();

}  // namespace proton::api
