"""What happens to profiling when the process forks or is asked to stop.

Signals: while a session is live, SIGTERM (and SIGINT when a program has set it to SIG_DFL)
finalizes every session, writes the profile, then lets the default action proceed, so the
process still dies of the signal with the usual exit status. Handlers the program installed
itself are never replaced; a program that exits from its own handler (sys.exit) gets its
profile written at exit. Python's own SIGINT handler raises KeyboardInterrupt, which writes
the profile at exit as any uncaught exception does, so it is left alone.

os._exit: a program that leaves through os._exit skips atexit, so while a session is live
os._exit is wrapped: it writes the profile first, waiting at most _EXIT_WRITE_DEADLINE_S (a
program often calls it to get past a hang, which a GPU flush could share), then exits with the
program's status. A forked child has no sessions of its own (below), so its os._exit is
immediate.

fork: the core gives the child an empty profiler (see csrc/runtime/fork_safety.h); here the
child drops the Python-side state that pointed at the parent's sessions.
"""

import os
import signal
import sys
import threading

from . import _C, hooks
from .flags import flags

_ours = {}  # signal number -> the handler ours replaced (SIG_DFL)
_os_exit = os._exit  # the interpreter's own
_EXIT_WRITE_DEADLINE_S = 30.0


def write_all(when: str = "", hint: str = "", announce: bool = True) -> None:
    """Finalizes every live session and says where the files went; never raises, since the
    program's own outcome (its exit, its signal) matters more. when: "at exit", "on SIGTERM"."""
    try:
        written = _C.finalize(None, "")
    except Exception as e:  # noqa: BLE001
        print(
            f"[PROTON] could not write the profile{' ' + when if when else ''}: {e}",
            file=sys.stderr,
        )
        return
    finally:
        flags.profiling_on = False
    hooks.registry.unregister(None)
    suffix = f" ({when}{hint})" if when else ""
    for path in written if announce else ():
        if path != "-":
            print(f"[PROTON] profile written to {path}{suffix}", file=sys.stderr)


def _on_signal(signum, frame):
    signal.signal(signum, _ours.pop(signum, signal.SIG_DFL))
    write_all(f"on {signal.Signals(signum).name}")
    os.kill(os.getpid(), signum)  # the default action, now that our handler is gone


def _exit_writing_profiles(status):
    """Stands in for os._exit while a session is live."""
    try:
        if _C.live_sessions():
            _write_within(_EXIT_WRITE_DEADLINE_S, "at os._exit")
    finally:
        _os_exit(status)


def _write_within(seconds: float, when: str) -> None:
    writer = threading.Thread(target=write_all, args=(when,), name="proton-exit-write", daemon=True)
    try:
        writer.start()
    except RuntimeError:  # interpreter shutdown: no new threads, so write on this one
        write_all(when)
        return
    writer.join(seconds)
    if writer.is_alive():
        print(
            f"[PROTON] the profile was not written within {seconds:g} s of os._exit; "
            "the program exits without it",
            file=sys.stderr,
            flush=True,
        )


def install_exit_handlers() -> None:
    """Called when a session starts: the signal handlers (only the main thread may set them)
    and the os._exit wrapper."""
    os._exit = _exit_writing_profiles
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        if signum in _ours:
            continue
        try:
            current = signal.getsignal(signum)
            if current == signal.SIG_DFL:
                signal.signal(signum, _on_signal)
                _ours[signum] = current
        except (ValueError, OSError):  # e.g. an embedded interpreter that forbids it
            continue


def uninstall_exit_handlers() -> None:
    """Called when no session is left: restore what was there, unless replaced since."""
    if os._exit is _exit_writing_profiles:
        os._exit = _os_exit
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, previous in list(_ours.items()):
        try:
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, previous)
        except (ValueError, OSError):
            pass
        del _ours[signum]


def _after_fork_in_child() -> None:
    # The core already dropped the parent's sessions; nothing here may write a file.
    flags.profiling_on = False
    hooks.registry.unregister(None)


os.register_at_fork(after_in_child=_after_fork_in_child)
