"""The calling thread's context."""

from typing import Optional

from . import _C
from .flags import flags


def depth(session: Optional[int] = 0) -> Optional[int]:
    """Number of open scopes recorded in the session on this thread; None when profiling is off."""
    if not flags.profiling_on or session is None:
        return None
    return _C.depth(session)
