"""`proton`: profile a whole program in one command.

    proton [options] script.py [args...]
    proton [options] pytest [args...]
    proton [options] -m module [args...]
    proton [options] ./app [args...]       (any executable: CUDA injection, see native.py)
    proton [options] python3 script.py     (the same as `proton script.py`)
    python -m proton ...

Session 0 is started before the program runs and written when it ends, whether it returns,
calls sys.exit or raises; the file's path goes to stderr. `proton.start`/`finalize` calls
inside the program are ignored. The program sees the sys.argv, sys.path[0] and
`__name__ == "__main__"` that `python script.py` / `python -m module` would give it, and
its exit status and uncaught exceptions pass through unchanged.

`-m` is the mode option (as in Triton's `proton`) when its value is a mode
(`pcsampling`, `pcsampling:interval=...`, `periodic_flushing...`, `default`, `mma`) and
the module to run otherwise; `--mode` is always the mode, and after `--` a `-m` is always
the module.
"""

import builtins
import io
import os
import re
import runpy
import shlex
import shutil
import sys
import types
import warnings

from . import _C, _process, context, native
from .flags import flags
from .profile import start

USAGE = """\
usage: proton [options] script.py [args...]
       proton [options] pytest [args...]
       proton [options] -m module [args...]
       proton [options] [--] ./app [args...]
       proton --cflags | --ldflags | --includedir | --libdir | --cmake-dir | --library

Profile a whole program (session 0) and write <name>.hatchet when it ends. An executable
(a CUDA C++ program, mpirun, a shell script) runs with Proton injected into CUDA: its kernels,
NVTX ranges and proton/proton.h scopes are recorded. `proton python3 script.py` is
`proton script.py`.

options (as proton.start):
  -n, --name NAME        output name (default: proton)
  -b, --backend BACKEND  cupti (NVIDIA kernel tracing; the default where a GPU is found),
                         instrumentation (intra-kernel scopes, NVIDIA), roctracer or
                         rocprofiler (AMD: accepted, not built into this version)
  -c, --context CONTEXT  shadow (default), python, or native (unwound C/C++ call stacks)
  -d, --data DATA        tree (default) or trace
  -m, --mode MODE        pcsampling[:interval=N], periodic_flushing[:format=F], default or mma
                         (with -b instrumentation)
  -k, --hook HOOK        triton
  -h, --help             show this help
A -m whose value is not a mode names the module to run; after `--`, -m is always a module.
For executables, -c is shadow or native and -k is not available (-c python and -k apply to
Python programs).
"""

_OPTIONS = {
    "-n": "name",
    "--name": "name",
    "-b": "backend",
    "--backend": "backend",
    "-c": "context",
    "--context": "context",
    "-d": "data",
    "--data": "data",
    "--mode": "mode",
    "-k": "hook",
    "--hook": "hook",
}
_MODE_NAMES = ("pcsampling", "periodic_flushing", "default", "mma")


class UsageError(Exception):
    pass


def _is_mode(value: str) -> bool:
    return value.split(":", 1)[0] in _MODE_NAMES


def parse_args(argv):
    """(start options, (kind, target, program args)) with kind 'script', 'module',
    'pytest' or 'exec' (an executable, run with CUDA injection)."""
    options = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            raise UsageError("")
        if arg == "--":
            i += 1
            if i < len(argv) and argv[i] == "-m":
                if i + 1 >= len(argv):
                    raise UsageError("-m needs a module name")
                return options, ("module", argv[i + 1], argv[i + 2 :])
            break
        key, value = arg, None
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
        if key in _OPTIONS or key == "-m":
            if value is None:
                if i + 1 >= len(argv):
                    raise UsageError(f"{key} needs a value")
                value = argv[i + 1]
                i += 1
            if key == "-m" and not _is_mode(value):
                return options, ("module", value, argv[i + 1 :])
            options["mode" if key == "-m" else _OPTIONS[key]] = value
            i += 1
            continue
        if arg.startswith("-") and arg != "-":
            raise UsageError(f"unknown option {arg}")
        break
    if i >= len(argv):
        raise UsageError("no program given")
    target, rest = argv[i], argv[i + 1 :]
    if os.path.basename(target) in ("pytest", "py.test"):
        return options, ("pytest", target, rest)
    if _PYTHON.match(os.path.basename(target)):
        python_program = _python_program(rest)
        if python_program is not None:
            return options, python_program
    if _is_executable(target):
        return options, ("exec", target, rest)
    return options, ("script", target, rest)


# python, python3, python3.12 (not python3-config).
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Interpreter flags that take no value and do not change what `proton script.py` means.
_PYTHON_FLAGS = set("BdEiIOqsSuvR") | {"OO"}


def _python_program(args):
    """`python3 [flags] script.py ...` or `python3 [flags] -m mod ...` as the launcher's own
    program kind; None for anything else (-c, stdin, -X/-W options): run as an executable."""
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return ("module", args[i + 1], args[i + 2 :])
        if arg.startswith("-") and arg != "-":
            if arg[1:] in _PYTHON_FLAGS or all(c in _PYTHON_FLAGS for c in arg[1:]):
                continue
            return None
        return ("script", arg, args[i + 1 :])
    return None


def _is_executable(target: str) -> bool:
    """An executable that is not a Python program: a path with the execute bit, or a command
    on PATH (`proton -- mpirun -n 2 ./app`). Files ending in .py and files whose #! line names
    python stay Python programs (profiled in this interpreter, with Python context)."""
    if target.endswith(".py"):
        return False
    path = target if os.sep in target else shutil.which(target)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return True
    return not (first.startswith(b"#!") and b"python" in first and os.sep in target)


def _run_program(kind: str, target: str, args: list) -> int:
    """Runs the program as `python` would; returns 0 or raises what the program raised."""
    if kind == "pytest":
        import pytest

        sys.argv = [target, *args]
        return int(pytest.main(list(args)))
    if kind == "module":
        sys.argv = [target, *args]  # runpy replaces argv[0] with the module's path
        sys.path[0] = os.getcwd()
        runpy.run_module(target, run_name="__main__", alter_sys=True)
        return 0
    if not os.path.exists(target):
        print(f"proton: can't open file {target!r}: no such file", file=sys.stderr)
        return 2
    sys.argv = [target, *args]
    path = os.path.abspath(target)
    sys.path[0] = os.path.dirname(path)
    if os.path.isdir(target) or not target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")  # a directory or zip with __main__.py
        return 0
    # As `python script.py`: argv[0] as given, __file__ absolute, a fresh __main__ module
    # in sys.modules (so pickle and multiprocessing find the program's classes).
    with io.open_code(path) as f:
        code = compile(f.read(), path, "exec")
    main_module = types.ModuleType("__main__")
    main_module.__file__ = path
    main_module.__builtins__ = builtins
    sys.modules["__main__"] = main_module
    exec(code, main_module.__dict__)  # noqa: S102 (running the user's program is the point)
    return 0


def _user_traceback(tb):
    """Skips the frames of this module and runpy, so the traceback starts in the program."""
    ours = (__file__, runpy.__file__, "<frozen runpy>")
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    return tb


def _launcher_files() -> list:
    """The files of the frames that run the program on its behalf: whatever called main()
    (the `proton` console script, or runpy and proton/__main__.py for `python -m proton`)
    and runpy, which runs `-m module` and directory programs."""
    files = {runpy.__file__, "<frozen runpy>"}
    frame = sys._getframe(1)
    while frame is not None:
        files.add(frame.f_code.co_filename)
        frame = frame.f_back
    return sorted(files)


def _prefixed(message: str) -> str:
    return message if message.startswith("[PROTON]") else f"[PROTON] {message}"


def _run_executable(options: dict, target: str, args: list, argv: list) -> None:
    """`proton ./app`: the session lives in the program (CUDA injection), not here."""
    if options.get("hook"):
        print("proton: -k/--hook applies to Python programs, not executables", file=sys.stderr)
        sys.exit(2)
    context = options.get("context") or "shadow"
    if context == "python":
        print(
            "proton: executables take -c shadow or -c native (Python context needs a Python "
            "program)",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        _C.check_session_options(
            options.get("name") or "proton",
            context,
            options.get("data") or "tree",
            options.get("backend") or "",
            options.get("mode") or "",
        )
    except (ValueError, TypeError, RuntimeError) as e:
        print(_prefixed(str(e)), file=sys.stderr)
        sys.exit(2)
    command = shlex.join(["proton", *argv])
    native.exit_like(native.run_injected(target, args, options, command))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) == 1 and argv[0] in native.INFO_OPTIONS:
        print(native.INFO_OPTIONS[argv[0]]())
        sys.exit(0)
    try:
        options, (kind, target, args) = parse_args(argv)
    except UsageError as e:
        stream = sys.stderr if str(e) else sys.stdout
        if str(e):
            print(f"proton: {e}", file=stream)
        print(USAGE, file=stream, end="")
        sys.exit(2 if str(e) else 0)
    if kind == "exec":
        _run_executable(options, target, args, argv)
    context.hide_launcher_frames(_launcher_files())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = start(**options)
    except (ValueError, TypeError, RuntimeError) as e:
        print(_prefixed(str(e)), file=sys.stderr)
        sys.exit(2)
    for warning in caught:  # e.g. no GPU runtime: one line, not a warning from this file
        print(_prefixed(str(warning.message)), file=sys.stderr)
    _C.set_command_line(shlex.join(["proton", *argv]))
    script = os.path.abspath(target) if kind == "script" else ""
    _C.set_program(os.getcwd(), script)
    if session is not None:
        _C.set_command_line_session(session)  # the C++ API's start/finalize defer to it too
    flags.command_line = True
    try:
        code = _run_program(kind, target, args)
    except SystemExit:
        _process.write_all()
        raise  # Python itself turns it into the exit status (and prints a message if any)
    except BaseException as e:  # noqa: BLE001 (written, then passed on like Python would)
        _process.write_all()
        tb = _user_traceback(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        sys.exit(130 if isinstance(e, KeyboardInterrupt) else 1)
    _process.write_all()
    sys.exit(code)


if __name__ == "__main__":
    main()
