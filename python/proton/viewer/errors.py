"""The one error the viewer raises for anything wrong with its input or options.

The command line turns it into a `[PROTON] ...` line on stderr and exit status 1; the Python
API lets it propagate. It is a `proton.ProfilerError` (and a `ValueError`), like the rest of
Proton's errors.
"""

from ..errors import ProfilerError


class ViewerError(ProfilerError, ValueError):
    """Bad profile file, unknown metric, unsupported device, bad option."""

    def __init__(self, message: str) -> None:
        if not message.startswith("[PROTON]"):
            message = f"[PROTON] {message}"
        super().__init__(message)
