"""Session lifecycle: start, activate, deactivate, finalize and the profile decorator."""

import atexit
import contextlib
import functools
import os
import sys
import threading
import warnings
from typing import Optional, Union

from . import _C, _libraries, _process, frameworks, hooks, instrumentation, triton_knobs
from . import mode as _mode
from .flags import flags
from .hooks.registry import Hook

DEFAULT_PROFILE_NAME = "proton"


def _guard(session, action: str) -> None:
    """Raises as triton.profiler does when the command line owns session 0."""
    if flags.command_line and session != 0:
        raise ValueError(f"Only one session can {action} when running from the command line.")


_instrumentation_starts = threading.Lock()
_session_contexts = {}  # live session -> its context, for the framework adapters it turned on


def _program_paths():
    """(working directory, main script's absolute path) of this process, "" where unknown:
    the profile's metadata carries them so that the viewer shows the program's files
    relative to them."""
    try:
        cwd = os.getcwd()
    except OSError:  # the directory was removed
        cwd = ""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    return cwd, os.path.abspath(script) if isinstance(script, str) and cwd else ""


def start(
    name: Optional[str] = None,
    *,
    context: Optional[str] = "shadow",
    data: Optional[str] = "tree",
    backend: Optional[str] = None,
    mode: Optional[Union[str, _mode.BaseMode]] = None,
    hook: Optional[Union[str, Hook]] = None,
) -> Optional[int]:
    """Start a profiling session writing `<name>.<format>` and return its id.

    hook: None, "triton" (Triton's launch metadata) or a hook object, e.g.
    `proton.hooks.launch.LaunchHook()` after its `configure(include=, exclude=)`.
    A name already used by a live session re-activates that session and returns its id.
    Returns None when the `proton` command line owns the profile, or PROTON_DISABLE=1 or
    `triton.knobs.proton.disable` says so. Triton's knobs are read here (see triton_knobs).
    """
    if not flags.command_line and _C.command_line_session() >= 0:
        flags.command_line = True  # e.g. a Python process of `proton ./app` (CUDA injection)
    if flags.command_line and hook is not None and 0 in _C.live_sessions():
        # The program asks for a launch hook: the command line's session gets it.
        hook_object = hooks.resolve(hook)
        hooks.triton_hook_owner()
        hooks.registry.register(hook_object, 0)
    if flags.command_line or os.environ.get("PROTON_DISABLE", "") in ("1", "true", "True"):
        return None
    knobs = triton_knobs.read()
    if knobs.disable:
        return None
    if name is None:
        name = DEFAULT_PROFILE_NAME
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"[PROTON] name must be a str or path, got {type(name).__name__}")
    hook_object = hooks.resolve(hook)  # ValueError for anything else, as in triton.profiler
    if hook_object is not None:
        hooks.triton_hook_owner()  # a clear error before any session exists
    triton_knobs.warn_unsupported(knobs, stacklevel=2)
    if backend in (None, "cupti", "instrumentation"):
        _C.set_library_search_dirs(knobs.cupti_dirs + _libraries.cupti_dirs())
    mode_text = _mode.to_string(mode)
    # Instrumentation sessions start one at a time: the check that a session compiles with the
    # configuration of those live holds until it is active (two threads starting sessions of
    # other modes both passed it, and the second compiled with the first one's).
    frameworks.check_context(context or "shadow")  # context="torch" without torch, say
    one_at_a_time = _instrumentation_starts if backend == "instrumentation" else None
    _C.set_program(*_program_paths())
    with one_at_a_time or contextlib.nullcontext():
        if backend == "instrumentation":
            mode_text, typed_mode = instrumentation.prepare(mode, data)
        with triton_knobs.environment(knobs.env):
            session, created, warning = _C.start(
                os.fspath(name),
                context or "shadow",
                data or "tree",
                backend or "",
                mode_text,
            )
        if backend == "instrumentation" and created:
            instrumentation.activate(session, typed_mode, data)
        if created:
            _session_contexts[session] = context or "shadow"
            frameworks.session_started(context or "shadow")
    flags.profiling_on = True
    _process.install_exit_handlers()
    if hook_object is not None:
        hooks.registry.register(hook_object, session)
    if warning:
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    return session


def activate(session: Optional[int] = None) -> None:
    """Resume recording into a session (None: every session)."""
    _guard(session, "be activated")
    _C.activate(session)
    hooks.registry.activate(session)


def deactivate(session: Optional[int] = None, flushing: bool = False) -> None:
    """Pause recording into a session (None: every session); its data stays in memory."""
    _guard(session, "be deactivated")
    _C.deactivate(session, flushing)
    hooks.registry.deactivate(session)


def finalize(session: Optional[int] = None, output_format: Optional[str] = "") -> None:
    """Write a session (None: every session) to its file and drop it.

    output_format: "" (the data kind's default), "hatchet", "hatchet_msgpack" or
    "chrome_trace". A session already finalized is ignored. Under the `proton` command
    line this does nothing: the command line writes the profile when the program ends.
    """
    if session is not None:
        _guard(session, "be finalized")
    if flags.command_line:
        return
    try:
        _C.finalize(session, output_format or "")
    finally:
        # Sessions that could not be written are dropped too: their hooks, compile step and
        # launcher go with them.
        live = _C.live_sessions()
        for finalized in hooks.registry.sessions() - set(live):
            hooks.registry.unregister(finalized)
        for finalized in instrumentation.live_sessions() - set(live):
            instrumentation.deactivate(finalized)
        for finalized in set(_session_contexts) - set(live):
            frameworks.session_ended(_session_contexts.pop(finalized))
        if session is None or not live:
            flags.profiling_on = False
        if not live:
            _process.uninstall_exit_handlers()


def profile(
    func=None,
    *,
    name: Optional[str] = None,
    context: Optional[str] = "shadow",
    data: Optional[str] = "tree",
    backend: Optional[str] = None,
    mode: Optional[Union[str, _mode.BaseMode]] = None,
    hook: Optional[Union[str, Hook]] = None,
):
    """Decorator: profile each call of the function (start, then deactivate on return).

    Usable bare (`@proton.profile`) or with arguments. Call finalize() to write the file.
    """

    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            session = start(name, context=context, data=data, backend=backend, mode=mode, hook=hook)
            try:
                return fn(*args, **kwargs)
            finally:
                if session is not None:
                    deactivate(session)

        return wrapper

    if func is not None:
        return decorator(func)
    return decorator


def _finalize_at_exit() -> None:
    """Writes sessions the program left unfinalized, so no data is lost at exit."""
    if _C.live_sessions():
        hint = "; call proton.finalize() to write it earlier"
        _process.write_all("at exit", hint, announce=not flags.command_line)


atexit.register(_finalize_at_exit)
