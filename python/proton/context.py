"""The calling thread's context."""

import os
from typing import Iterable, Optional

from . import _C
from .flags import flags


def _install_python_context(hidden_files: Iterable[str] = ()) -> None:
    """Registers the C++ frame walker behind context="python". Frames of files inside this
    package, and of the files named in hidden_files exactly, are never shown.
    PROTON_PYTHON_CONTEXT_GIL=0 stops a launching thread that released the GIL from taking
    it back for the walk (its launches then get no frames)."""
    here = os.path.dirname(os.path.abspath(__file__))
    prefixes = sorted({here + os.sep, os.path.realpath(here) + os.sep})
    acquire = os.environ.get("PROTON_PYTHON_CONTEXT_GIL", "1") not in ("0", "false", "False")
    _C.install_python_context(prefixes, acquire, sorted(set(hidden_files)))


def hide_launcher_frames(files: Iterable[str]) -> None:
    """Leaves out the frames of these files (by co_filename) as well: the `proton` command
    line hides its launcher script and runpy, so a program's frames start at its own file."""
    _install_python_context(files)


_install_python_context()


def depth(session: Optional[int] = 0) -> Optional[int]:
    """Number of open scopes recorded in the session on this thread; None when profiling is off."""
    if not flags.profiling_on or session is None:
        return None
    return _C.depth(session)
