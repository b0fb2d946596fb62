"""Session lifecycle: start, activate, deactivate, finalize and the profile decorator."""

import atexit
import functools
import os
import warnings
from typing import Optional, Union

from . import _C, _libraries, _process, hooks, instrumentation
from . import mode as _mode
from .flags import flags

DEFAULT_PROFILE_NAME = "proton"

_HOOKS = (None, "triton")


def _guard(session, action: str) -> None:
    """Raises as triton.profiler does when the command line owns session 0."""
    if flags.command_line and session != 0:
        raise ValueError(f"Only one session can {action} when running from the command line.")


def start(
    name: Optional[str] = None,
    *,
    context: Optional[str] = "shadow",
    data: Optional[str] = "tree",
    backend: Optional[str] = None,
    mode: Optional[Union[str, _mode.BaseMode]] = None,
    hook: Optional[str] = None,
) -> Optional[int]:
    """Start a profiling session writing `<name>.<format>` and return its id.

    A name already used by a live session re-activates that session and returns its id.
    Returns None when the `proton` command line owns the profile or PROTON_DISABLE=1.
    """
    if flags.command_line and hook == "triton" and 0 in _C.live_sessions():
        # The program asks for Triton's launch metadata: the command line's session gets it.
        hooks.triton_hook_owner()
        hooks.register(0, hook)
    if flags.command_line or os.environ.get("PROTON_DISABLE", "") in ("1", "true", "True"):
        return None
    if name is None:
        name = DEFAULT_PROFILE_NAME
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"[PROTON] name must be a str or path, got {type(name).__name__}")
    if hook not in _HOOKS:
        raise ValueError(f"Unsupported hook: {hook!r}")
    if hook == "triton":
        hooks.triton_hook_owner()  # a clear error before any session exists
    if backend in (None, "cupti", "instrumentation"):
        _C.set_library_search_dirs(_libraries.cupti_dirs())
    mode_text = _mode.to_string(mode)
    if backend == "instrumentation":
        mode_text = instrumentation.prepare(mode, data)
    session, created, warning = _C.start(
        os.fspath(name), context or "shadow", data or "tree", backend or "", mode_text
    )
    if backend == "instrumentation" and created:
        instrumentation.activate(session)
    flags.profiling_on = True
    _process.install_signal_handlers()
    if hook is not None:
        hooks.register(session, hook)
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
    _C.finalize(session, output_format or "")
    live = _C.live_sessions()
    for finalized in hooks.registry.sessions() - set(live):
        hooks.registry.unregister(finalized)
    for finalized in instrumentation.live_sessions() - set(live):
        instrumentation.deactivate(finalized)
    if session is None or not live:
        flags.profiling_on = False
    if not live:
        _process.uninstall_signal_handlers()


def profile(
    func=None,
    *,
    name: Optional[str] = None,
    context: Optional[str] = "shadow",
    data: Optional[str] = "tree",
    backend: Optional[str] = None,
    mode: Optional[Union[str, _mode.BaseMode]] = None,
    hook: Optional[str] = None,
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
