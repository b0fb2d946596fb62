"""Thread inheritance: a thread started while profiling adopts the open scopes that its
starting thread had when it called Thread.start(), as DESIGN.md's shadow context says.

Installed once at import by wrapping threading.Thread.start; when profiling is off the
wrapper only checks one flag. Threads created outside Python (native threads) inherit the
main thread's stack on first use instead.
"""

import threading

from . import _C

_original_start = threading.Thread.start


def _start_with_context(self):
    if _C.profiling_on():
        snapshot = _C.capture_context()
        run = self.run

        def run_in_context():
            # Adopted, the snapshot is let go: a thread object that outlives the program's end
            # (a daemon pool's worker) must not hold a binding object past it (nanobind
            # reports those as leaks at exit).
            nonlocal snapshot
            adopted, snapshot = snapshot, None
            _C.adopt_context(adopted)
            del adopted
            run()

        self.run = run_in_context
    _original_start(self)


def install() -> None:
    if threading.Thread.start is not _start_with_context:
        threading.Thread.start = _start_with_context
