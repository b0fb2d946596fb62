"""Where the C/C++ host API lives in the installed package, and running native programs.

    nvcc app.cu $(proton --cflags) $(proton --ldflags)
    cmake -Dproton_DIR=$(proton --cmake-dir) ...   # find_package(proton CONFIG)
    proton ./app args...                           # CUDA injection, session 0

`libprotonprof.so` is the one core of the process: `proton._C` links it, programs built with the
flags below link it, and `proton ./app` injects it (CUDA_INJECTION64_PATH), so a C++ program,
the injected session and `import proton` in one process all see the same sessions.
"""

import os
import shlex
import signal
import subprocess
import sys
import tempfile

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The directory holding proton/proton.h."""
    return os.path.join(_PACKAGE, "include")


def get_lib_dir() -> str:
    """The directory holding libprotonprof.so."""
    return os.path.join(_PACKAGE, "lib")


def library_path() -> str:
    return os.path.join(get_lib_dir(), "libprotonprof.so")


def get_cmake_dir() -> str:
    """proton_DIR for find_package(proton CONFIG)."""
    return os.path.join(get_lib_dir(), "cmake", "proton")


def cflags() -> str:
    return f"-I{shlex.quote(get_include())}"


def ldflags(nvcc_style: bool = False) -> str:
    """Link flags with an RPATH to the package's library (works for g++, clang++ and nvcc:
    nvcc accepts -L/-l and passes -Wl,... through with -Xlinker)."""
    lib = shlex.quote(get_lib_dir())
    rpath = f"-Xlinker -rpath -Xlinker {lib}" if nvcc_style else f"-Wl,-rpath,{lib}"
    return f"-L{lib} {rpath} -lprotonprof"


# Options of `proton` that only describe the installation: printed, nothing run.
INFO_OPTIONS = {
    "--cflags": cflags,
    "--ldflags": lambda: ldflags(nvcc_style=True),
    "--includedir": get_include,
    "--libdir": get_lib_dir,
    "--cmake-dir": get_cmake_dir,
    "--library": library_path,
}

# Session options `proton ./app` can hand to the injected library, by start() argument.
INJECT_ENV = {
    "name": "PROTON_INJECT_NAME",
    "context": "PROTON_INJECT_CONTEXT",
    "data": "PROTON_INJECT_DATA",
    "backend": "PROTON_INJECT_BACKEND",
    "mode": "PROTON_INJECT_MODE",
}


def injection_env(options: dict, command_line: str, report_path: str, base=None) -> dict:
    """The environment that makes CUDA load our library into the program at cuInit, with the
    session options the command line asked for (see csrc/api/injection.h)."""
    env = dict(os.environ if base is None else base)
    for key in INJECT_ENV.values():
        env.pop(key, None)
    env["CUDA_INJECTION64_PATH"] = library_path()
    env[INJECT_ENV["name"]] = options.get("name") or "proton"
    for key, var in INJECT_ENV.items():
        if key != "name" and options.get(key):
            env[var] = options[key]
    env["PROTON_INJECT_COMMAND"] = command_line
    env["PROTON_INJECT_REPORT"] = report_path
    # NVTX_INJECTION64_PATH is left to the backend, which names the CUPTI it chose when CUDA
    # initialises: a library named here could be another major than the one the backend picks,
    # and NVTX would then load a second CUPTI and deliver its ranges there (seen on the H100:
    # no NVTX frame at all, and two libcupti mapped).
    return env


def read_report(path: str):
    """(pids that initialised CUDA, paths written) from the report file the library appends to
    (lines "cuda <pid>", "started <pid>", "wrote <path>")."""
    cuda, written = [], []
    try:
        with open(path) as f:
            for line in f:
                kind, _, value = line.rstrip("\n").partition(" ")
                if kind == "cuda":
                    cuda.append(value)
                elif kind == "wrote":
                    written.append(value)
    except OSError:
        pass
    return cuda, written


def run_injected(target: str, args: list, options: dict, command_line: str) -> int:
    """Runs an executable with Proton injected; returns its exit status (negative: the signal
    that ended it). SIGTERM, SIGINT and SIGHUP sent to the launcher are passed to the program,
    which writes its profile before it dies of them."""
    if not os.path.exists(library_path()):
        print(f"[PROTON] {library_path()} is missing; reinstall proton", file=sys.stderr)
        return 2
    if os.environ.get("CUDA_INJECTION64_PATH"):
        print(
            f"[PROTON] replacing CUDA_INJECTION64_PATH={os.environ['CUDA_INJECTION64_PATH']}",
            file=sys.stderr,
        )
    fd, report = tempfile.mkstemp(prefix="proton_report_")
    os.close(fd)
    try:
        env = injection_env(options, command_line, report)
        # Forwarding is in place before the program exists, so that a signal arriving right
        # after it started (before Popen returns to us) reaches it instead of ending only us.
        forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        child, pending = [], []

        def forward(signum, _frame):
            if child:
                child[0].send_signal(signum)
            else:
                pending.append(signum)

        previous = {s: signal.signal(s, forward) for s in forwarded}
        try:
            try:
                child.append(subprocess.Popen([target, *args], env=env))
            except FileNotFoundError:
                print(f"proton: {target}: command not found", file=sys.stderr)
                return 127
            except PermissionError:
                print(f"proton: {target}: permission denied", file=sys.stderr)
                return 126
            for signum in pending:
                child[0].send_signal(signum)
            code = child[0].wait()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        cuda, written = read_report(report)
        if not cuda and not written:
            print(
                f"[PROTON] {target} never initialised CUDA: no profile written",
                file=sys.stderr,
            )
        elif not written:
            print("[PROTON] the program initialised CUDA but wrote no profile", file=sys.stderr)
        return code
    finally:
        os.unlink(report)


def exit_like(code: int) -> None:
    """Leaves the launcher as the program left: its exit status, or death by its signal."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # if the signal did not end us (it is blocked): the shell's convention
    sys.exit(code)
